"""``specscope calibrate``: alpha and k from a vLLM server's ``/metrics``.

The counters are read by :mod:`engine.serving.metrics`. One snapshot gives the figures since
the server started; two (before and after) give the window between them. From the counts:
draft acceptance rate = accepted / draft tokens; mean acceptance length = 1 + accepted /
drafts; acceptance at position i = per_pos[i] / drafts; and the counted alpha of this project,
accepted / trials, where a cycle's trials are its accepted tokens plus one unless it accepted
all k: trials = accepted + drafts - per_pos[k-1]. Without per-position counts the alpha is
solved from the mean acceptance length under the i.i.d. model and labelled so.

Counters that are inconsistent or that go backwards between the snapshots end in
:class:`~engine.serving.metrics.MetricsError` with a readable message, as does text the
reader refuses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.analytic import acceptance as estimators
from engine.serving.metrics import MetricsError, SpecCounters, read_counts


@dataclass
class CalibrationRow:
    """One label set (``model_name``, ``engine``, ...): the counts and what they give."""

    labels: dict[str, str]
    drafts: float
    draft_tokens: float
    accepted: float
    per_position_counts: list[float]
    k: int
    # None where there is nothing to divide by (engine.analytic.acceptance)
    draft_acceptance_rate: float | None
    mean_acceptance_length: float | None
    per_position_acceptance: list[float | None]
    alpha_counted: float | None
    alpha_source: str  # "per-position counts" or "mean acceptance length (i.i.d. model)"

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.labels.items()) or "(no labels)"


@dataclass
class Calibration:
    rows: list[CalibrationRow]
    window: bool  # two snapshots: the figures are for the window between them
    notices: list[str] = field(default_factory=list)

def calibrate(before: str, after: str | None = None) -> Calibration:
    """One row per label set from one snapshot, or from the window between two."""
    first = read_counts(before, "the first snapshot" if after is not None else "the metrics")
    notices: list[str] = []
    if after is None:
        counts = first
    else:
        second = read_counts(after, "the second snapshot")
        counts = {}
        for key, late in second.items():
            early = first.get(key)
            if early is None:
                notices.append(f"{_key_label(key)} appears only in the second snapshot; "
                               "its counts are taken from the start.")
                early = SpecCounters()
            counts[key] = _difference(early, late, _key_label(key))
    rows = []
    for key, c in counts.items():
        if c.drafts == 0:
            notices.append(f"{_key_label(key)}: no drafts counted "
                           f"{'in the window' if after is not None else 'yet'}; left out.")
            continue
        rows.append(_row(dict(key), c))
    if not rows:
        raise MetricsError("no drafts were counted" + (" between the two snapshots" if after
                           else "") + ": send the server some requests first")
    return Calibration(rows=rows, window=after is not None, notices=notices)


def _key_label(key: tuple) -> str:
    return ", ".join(f"{k}={v}" for k, v in key) or "(no labels)"


def _difference(early: SpecCounters, late: SpecCounters, label: str) -> SpecCounters:
    window = late - early
    before = early.per_position + [0] * (len(late.per_position) - len(early.per_position))
    named = [("drafts", early.drafts, window.drafts),
             ("draft tokens", early.draft_tokens, window.draft_tokens),
             ("accepted tokens", early.accepted, window.accepted),
             *((f"position {i}", a, d) for i, (a, d) in enumerate(
                 zip(before, window.per_position, strict=False)))]
    for what, a, d in named:
        if d < 0:
            raise MetricsError(
                f"{label}: {what} went backwards between the snapshots ({a:g} then {a + d:g}); "
                "was the server restarted, or are the snapshots in the wrong order?")
    return window


def _row(labels: dict[str, str], c: SpecCounters) -> CalibrationRow:
    where = ", ".join(f"{k}={v}" for k, v in labels.items()) or "(no labels)"
    if c.accepted > c.draft_tokens:
        raise MetricsError(f"{where}: more tokens accepted ({c.accepted:g}) than drafted "
                           f"({c.draft_tokens:g}); these are not consistent counters")
    per_pos = c.per_position
    rising = any(later > earlier for earlier, later in zip(per_pos, per_pos[1:], strict=False))
    if rising or any(x > c.drafts for x in per_pos):
        raise MetricsError(f"{where}: per-position counts must fall from position 0 on and "
                           "never exceed the drafts")
    k = len(per_pos) or max(1, round(c.draft_tokens / c.drafts))
    if per_pos:
        alpha = estimators.counted_alpha_vllm(c.accepted, c.drafts, per_pos)
        source = "per-position counts"
    else:
        alpha = estimators.alpha_from_mean_accepted(c.accepted / c.drafts, k)
        source = "mean acceptance length (i.i.d. model)"
    return CalibrationRow(
        labels=labels,
        drafts=c.drafts,
        draft_tokens=c.draft_tokens,
        accepted=c.accepted,
        per_position_counts=per_pos,
        k=k,
        draft_acceptance_rate=estimators.draft_acceptance_rate(c.accepted, c.draft_tokens),
        # vLLM counts a draft only for a step that proposed tokens
        mean_acceptance_length=estimators.mean_acceptance_length(c.accepted, c.drafts),
        per_position_acceptance=estimators.per_position_vllm(per_pos, c.drafts),
        alpha_counted=alpha,
        alpha_source=source,
    )


def markdown(calibration: Calibration) -> str:
    scope = "between the two snapshots" if calibration.window else "since the server started"
    lines = [
        f"vLLM speculative decoding, {scope}:",
        "",
        "| labels | k | drafts | draft acceptance rate | mean acceptance length | counted α "
        "| per-position acceptance |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in calibration.rows:
        positions = " ".join(_num(x, 2) for x in r.per_position_acceptance) or "n/a"
        alpha = _num(r.alpha_counted) + ("" if r.per_position_counts else " (i.i.d. fit)")
        lines.append(f"| {r.label} | {r.k} | {r.drafts:g} | {_num(r.draft_acceptance_rate)} "
                     f"| {_num(r.mean_acceptance_length, 2)} | {alpha} | {positions} |")
    return "\n".join(lines + [""] + calibration.notices) + "\n"


def _num(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"
