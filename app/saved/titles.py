"""A saved run, a slider state and a run's charts, each named in one line: the titles of
pages, preview cards and chart files."""

from __future__ import annotations

from typing import Any

from app.saved.replay import summary_event
from engine.analytic.drafters import DRAFTER_WORDS
from engine.analytic.theory import Figures

# A run's charts as files: their title and axis labels.
CHARTS = {
    "positions": {"title": "Acceptance at each draft position", "x_label": "draft position i",
                  "y_label": "share accepting i"},
    "lengths": {"title": "Acceptance lengths", "x_label": "drafts accepted in a cycle",
                "y_label": "share of cycles"},
}


def short_prompt(prompt: str, limit: int = 48) -> str:
    flat = " ".join(prompt.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def run_title(record: dict[str, Any]) -> str:
    """What the run shows, in one line: "k 4: measured 1.31x, predicted 1.34x, alpha 0.70"."""
    s = vars(summary_event(record))  # the prediction as this server makes it

    def num(key: str, unit: str = "") -> str:  # None: nothing to estimate from
        return "n/a" if s[key] is None else f"{s[key]:.2f}{unit}"

    # Every drafter but the draft model names itself; a draft model's run reads as it always
    # has.
    kind = record.get("settings", {}).get("drafter", "model")
    drafter = {"ngram": "prompt lookup, "}.get(
        kind, "" if kind == "model" or kind not in DRAFTER_WORDS else f"{DRAFTER_WORDS[kind]}, ")
    tree = s["tree"]
    shape = (f"k {s['k']}" if not tree else f"an EAGLE-2 tree {tree}" if "," in tree
             else f"a tree of {len(tree.split(';'))}, depth {s['k']}")
    return (f"{drafter}{shape}: measured {num('speedup_measured', 'x')}, predicted "
            f"{num('speedup_predicted', 'x')}, alpha {num('alpha_counted')}")


def slider_title(fig: Figures) -> str:
    """The slider state in one line: "alpha 0.70, k 4: 1.61x, best k 3"."""
    more = " or more" if fig.best_at_edge else ""  # as the page says it
    best = f"best k {fig.best_k}{more}" if fig.worth_speculating else "do not speculate"
    drafter = "" if fig.pi is None else f"prompt lookup (pi {fig.pi:.2f}), "
    return f"{drafter}alpha {fig.alpha:.2f}, k {fig.k}: {fig.speedup:.2f}x, {best}"


def slider_headline(fig: Figures) -> str:
    """The page's headline as one sentence, for the preview card."""
    more = " or more" if fig.best_at_edge else ""
    verdict = (f"Best k = {fig.best_k}{more}, worth {fig.best_speedup:.2f}×."
               if fig.worth_speculating
               else f"Do not speculate: even the best k ({fig.best_k}) gives "
                    f"{fig.best_speedup:.2f}×.")
    drafter = ("" if fig.pi is None else
               f"With prompt lookup proposing in π = {fig.pi:.2f} of cycles, at")
    opening = f"{drafter} α" if drafter else "At α"
    return (f"{opening} = {fig.alpha:.2f} and k = {fig.k}, a cycle yields "
            f"{fig.expected_tokens:.2f} tokens for {fig.cycle_cost:.2f} target steps: "
            f"{fig.speedup:.2f}× plain decoding. " + verdict)
