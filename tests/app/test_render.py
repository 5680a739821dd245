"""Engine events rendered for the page: token text is always escaped."""

from __future__ import annotations

from app.render import render_page_message
from app.run_messages import RunMessage
from engine.decoder.events import CycleEvent, Token
from engine.decoder.stats import acceptance


def cycle(texts_and_kinds: list[tuple[str, str]]) -> CycleEvent:
    tokens = [Token(i, text, kind) for i, (text, kind) in enumerate(texts_and_kinds)]
    drafts = [t for t in tokens if t.kind != "target"]
    accepted = sum(t.kind == "accepted" for t in tokens)
    return CycleEvent(index=0, tokens=tokens, draft_ms=1.0, verify_ms=2.0, cycle_ms=3.2,
                      k=len(drafts), n_accepted=accepted, rejected=accepted < len(drafts),
                      draft_step_ms=[0.5] * len(drafts), overlap=[0.9] * len(drafts),
                      n_emitted=accepted + 1)


def test_token_text_with_markup_is_escaped():
    event = cycle([("<script>alert(1)</script>", "accepted"), ("<img src=x onerror=y>", "rejected"),
                   ("&amp;", "discarded"), ('"/><b>', "target")])
    out = render_page_message(RunMessage.cycle(event, acceptance([event]), 4.0, 10.0))
    for markup in ("<script", "<img", "<b>"):
        assert markup not in out["chips"]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out["chips"]
    assert "&amp;amp;" in out["chips"]
    # The output text is marked by the model that produced each token, and escaped too.
    assert out["text_html"] == ('<span class="by-draft">&lt;script&gt;alert(1)&lt;/script&gt;'
                                '</span><span class="by-target">&#34;/&gt;&lt;b&gt;</span>')


def test_cycle_timeline_draws_draft_verify_and_target_alone_on_the_runs_scale():
    event = cycle([(" the", "accepted"), ("x", "rejected"), ("y", "target")])
    chips = render_page_message(RunMessage.cycle(event, acceptance([event]), 4.0, 10.0))["chips"]
    assert 'viewBox="0 0 10.000 10"' in chips
    assert 'class="draft-time" x="0" y="1" width="1.000"' in chips
    assert 'class="verify-time" x="1.000" y="1" width="2.000"' in chips
    assert 'x1="4.000"' in chips and "draft 1.0 + verify 2.0 ms" in chips


def test_chips_carry_their_kind_and_visible_whitespace():
    event = cycle([(" the", "accepted"), ("\n", "accepted"), ("x", "rejected"), ("", "target")])
    chips = render_page_message(RunMessage.cycle(event, acceptance([event]), 4.0, 10.0))["chips"]
    assert chips.count('class="chip accepted"') == 2 and chips.count('class="chip rejected"') == 1
    assert "·the" in chips and "↵" in chips and "⋯" in chips


def test_a_summary_without_estimates_renders_dashes_and_draws_only_what_was_measured():
    """No draft ever tried (a prompt-lookup drafter that never matched): no alpha, so no
    model to draw and no prediction; the figures read as a dash, the page still renders."""
    from dataclasses import replace

    from app.saved.titles import run_title
    from engine.decoder.stats import summarize

    event = cycle([(" the", "accepted"), ("x", "rejected"), ("y", "target")])
    summary = replace(summarize([event], [4.0]), alpha_counted=None, alpha_expected=None,
                      draft_acceptance_rate=None, mean_acceptance_length=None,
                      speedup_predicted=None, per_position_acceptance=[None, None])
    html = render_page_message(RunMessage.summary(summary))["html"]
    assert 'data-summary="alpha_counted">—<' in html
    assert 'data-summary="speedup_predicted">—<' in html
    positions, lengths = (svg.split("</svg>")[0]
                          for svg in html.split('<svg class="chart bar-chart"')[1:3])
    assert 'class="bar"' not in positions and "model-point" not in positions
    assert lengths.count('class="bar"') == 3 and "model-point" not in lengths  # 0..k counted
    assert run_title({"summary": vars(summary)}).endswith("predicted n/a, alpha n/a")


def test_use_these_numbers_carries_the_drafter_preset_and_a_lookup_runs_pi():
    from dataclasses import replace

    from app.render import summary_context
    from engine.decoder.stats import summarize

    event = cycle([(" the", "accepted"), ("x", "rejected"), ("y", "target")])
    summary = summarize([event], [4.0])
    assert summary_context(summary)["use"]["preset"] == "model"
    assert "pi" not in summary_context(summary)["use"]
    looked_up = replace(summary, drafter="ngram", proposal_share=0.237)
    use = summary_context(looked_up)["use"]
    assert (use["preset"], use["pi"]) == ("ngram", "0.24")
    headed = summary_context(replace(summary, drafter="eagle"))["use"]
    assert headed["preset"] == "eagle" and "pi" not in headed
    # a run that drafted k every cycle brings its acceptance by position, as survival rates
    rates = [0.8, 0.5, 0.25, 0.125][: summary.k]
    curve = summary_context(replace(summary, per_position_acceptance=rates))["use"]
    assert curve["positions"] == ",".join(f"{r:g}" for r in rates)
    assert "positions" not in summary_context(replace(
        summary, per_position_acceptance=[0.8] + [None] * (summary.k - 1)))["use"]
    assert "positions" not in use  # prompt lookup: pi prices it


def lookup_cycle(accepted: int, proposed: int) -> CycleEvent:
    tokens = ([Token(1, "a", "accepted")] * accepted
              + [Token(2, "b", "rejected")] * (accepted < proposed) + [Token(3, "c", "target")])
    return CycleEvent(index=0, tokens=tokens, draft_ms=0.1, verify_ms=6.0, cycle_ms=6.1, k=4,
                      n_accepted=accepted, rejected=accepted < proposed, draft_step_ms=[0.1],
                      overlap=[0.9] * (accepted + (accepted < proposed)),
                      n_emitted=accepted + 1, drafter="ngram", n_proposed=proposed)


LOOKUP_CYCLES = [lookup_cycle(4, 4), lookup_cycle(1, 2), lookup_cycle(0, 3)] + [
    lookup_cycle(0, 0)] * 5


def test_a_lookup_summary_shows_pi_and_counts_lengths_over_the_cycles_with_a_proposal():
    from app.render import summary_context
    from engine.analytic.geometric import length_shares
    from engine.decoder.stats import summarize

    summary = summarize(LOOKUP_CYCLES, [4.0])
    html = render_page_message(RunMessage.summary(summary))["html"]
    assert 'data-summary="proposal_share">0.375 (3.0 tokens a proposal)' in html
    assert "theory from the measured α, π, c, v" in html
    context = summary_context(summary)
    # 3 cycles proposed: one accepted 0, one 1, one 4; the 5 plain steps are not "0 accepted"
    assert [b.measured for b in context["lengths"].bars] == [1 / 3, 1 / 3, 0, 0, 1 / 3]
    assert [b.model for b in context["lengths"].bars] == length_shares(
        summary.alpha_counted, [5, 0, 1, 1, 1])
    assert "share of proposals" in html  # the axis; the caption names the base in full
    assert "The cycles with a proposal by drafts accepted" in html
    assert "Of the cycles with a proposal that proposed at least i drafts" in html


def test_the_summary_sets_the_histograms_prediction_beside_alphas_and_tests_independence():
    from engine.decoder.stats import summarize

    def model_cycle(accepted: int) -> CycleEvent:
        kinds = [("d", "accepted")] * accepted + [("r", "rejected")] * (accepted < 4)
        kinds += [("x", "discarded")] * max(0, 3 - accepted) + [("t", "target")]
        return cycle(kinds)

    cycles = [model_cycle(0)] * 45 + [model_cycle(a) for a in (1, 1, 2, 2, 3)] + [
        model_cycle(4)] * 50
    summary = summarize(cycles, [4.0])
    html = render_page_message(RunMessage.summary(summary))["html"]
    section = html.split('id="correlated-acceptance"')[1].split("</div>")[0]
    assert f"From α alone it predicts <strong data-summary=\"speedup_predicted_again\">" \
           f"{summary.speedup_predicted:.2f}×" in section
    assert f'data-summary="speedup_from_histogram">{summary.speedup_from_histogram:.2f}×' \
           in section
    assert "χ² = " in section and "df = 3" in section and "p = &lt; 0.0001" in section
    assert "the lengths depart from independent acceptance" in section
    assert "as independent draws" in section  # what the test assumes


def test_a_saved_runs_title_predicts_with_its_drafters_formula():
    """A run saved before the fix carries the draft model's formula for prompt lookup: the
    title and the page derive the prediction from the saved cycles again."""
    from dataclasses import asdict, replace

    from app.saved.titles import run_title
    from engine.decoder.stats import summarize

    summary = summarize(LOOKUP_CYCLES, [4.0])
    stale = replace(summary, speedup_predicted=2.98)
    record = {"summary": asdict(stale), "settings": {"drafter": "ngram"},
              "cycles": [asdict(c) for c in LOOKUP_CYCLES]}
    assert f"predicted {summary.speedup_predicted:.2f}x" in run_title(record)
    assert "2.98" not in run_title(record)
