"""Where a plan's alpha came from, and whether it was measured on the pair the plan deploys.

Alpha belongs to a pair (target and drafter), a domain, a temperature and a way of drafting
(vLLM's ``draft_sample_method``): a probe's JSON says all four, vLLM's counters name the
target only (``model_name``), and an alpha given by hand says none. A plan made for another
pair than the one alpha was measured on (the shipped 8M pair's probe planning Llama 3.1 70B)
is a what-if, and the plan says so (:meth:`AlphaSource.mismatch`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.planner.vllm_config import EAGLE_METHODS, MEDUSA, SELF_SPEC

DRAFTER_WORDS = {"model": "a draft model", "ngram": "prompt lookup", "eagle": "an EAGLE head",
                 MEDUSA: "Medusa heads", "mtp": "the target's own MTP layers",
                 SELF_SPEC: "self-speculation"}


def drafter_kind(method: str) -> str:
    """The drafter's kind (``model``, ``eagle``, ``medusa``, ``mtp``, ``self-spec``) from
    vLLM's method name."""
    if method in (MEDUSA, "mtp", SELF_SPEC):
        return method
    return "eagle" if method in EAGLE_METHODS else "model"


def _same_model(a: str, b: str) -> bool:
    """The same checkpoint, named by a folder or a hub id: the last path part, any case."""
    def name(x: str) -> str:
        return x.strip().rstrip("/").rsplit("/", 1)[-1].lower()

    return name(a) == name(b)


@dataclass(frozen=True)
class AlphaSource:
    """What measured alpha: ``origin`` "probe" (a probe's JSON), "metrics" (vLLM's counters)
    or "hand" (given); ``where`` names the file(s) or the option. The rest is None where the
    source does not say: the pair (``target``, ``draft``, ``drafter`` as "model", "ngram" or
    "eagle"), the domains, the temperature and the draft sampling."""

    origin: str
    where: str
    target: str | None = None
    draft: str | None = None
    drafter: str | None = None
    domains: tuple[str, ...] = ()
    temperature: float | None = None
    draft_sample: str | None = None

    @property
    def measured(self) -> bool:
        return self.origin != "hand"

    def text(self) -> str:
        """The source in one sentence."""
        if not self.measured:
            return (f"alpha given by hand ({self.where}): no pair, domain, temperature or "
                    "draft sampling measured it")
        how = "a probe" if self.origin == "probe" else "vLLM's counters"
        if self.target is None:
            pair = "pair not recorded"
        elif self.draft is None:
            pair = f"target {self.target} (the draft is not recorded)"
        else:
            pair = f"pair {self.target} / {self.draft}"
        if self.drafter is not None:
            pair += f" ({DRAFTER_WORDS.get(self.drafter, self.drafter)})"
        parts = [pair]
        if self.domains:
            parts.append(f"domain{'s' if len(self.domains) > 1 else ''} "
                         + ", ".join(self.domains))
        parts.append("temperature not recorded" if self.temperature is None
                     else f"temperature {self.temperature:g}")
        parts.append("draft sampling not recorded" if self.draft_sample is None
                     else f"{self.draft_sample} drafting")
        return f"alpha measured by {how} ({self.where}): " + ", ".join(parts)

    def mismatch(self, target: str, draft: str, method: str) -> str | None:
        """A warning when alpha was measured on another pair than the one planned (target,
        draft as vLLM loads them, and vLLM's method), else None."""
        if not self.measured:
            return None
        kind = drafter_kind(method)
        planned = (f"{target} / {draft}" if kind != SELF_SPEC else f"{target} drafting for "
                   "itself")
        differs = []
        if self.target is not None and not _same_model(self.target, target):
            differs.append("target")
        if (self.draft is not None and kind != SELF_SPEC
                and not _same_model(self.draft, draft)):
            differs.append("draft")
        if self.drafter is not None and self.drafter != kind:
            differs.append("drafter")
        if not differs:
            return None
        measured = (f"{self.target} / {self.draft}" if self.draft is not None
                    else f"{self.target}" if self.target is not None else "another pair")
        return (f"alpha was measured on {measured}"
                + (f" ({DRAFTER_WORDS.get(self.drafter, self.drafter)})" if self.drafter else "")
                + f" and plans {planned} ({DRAFTER_WORDS[kind]}): the {' and '.join(differs)} "
                + ("differs" if len(differs) == 1 else "differ")
                + ". Acceptance belongs to the pair, so this plan is a what-if until "
                "alpha is measured on the pair it deploys (a probe of it, or vLLM's counters "
                "while it serves).")

    def json(self) -> dict:
        return {"origin": self.origin, "where": self.where, "target": self.target,
                "draft": self.draft, "drafter": self.drafter, "domains": list(self.domains),
                "temperature": self.temperature, "draft_sample": self.draft_sample,
                "text": self.text()}


def by_hand(where: str, domains: Sequence[str] = ()) -> AlphaSource:
    return AlphaSource("hand", where, domains=tuple(domains))


def from_probe(data: dict, where: str, domains: Sequence[str], temperature: float,
               draft_sample: str | None) -> AlphaSource:
    """A probe's JSON (``specscope probe --json``, or ``/probes/ID.json`` with the result
    under "result"): its pair, drafter and way of drafting."""
    result = data.get("result", data) if isinstance(data, dict) else {}
    result = result if isinstance(result, dict) else {}
    drafter = result.get("drafter") if isinstance(result.get("drafter"), str) else None
    draft = result.get("draft")
    if drafter == "eagle" and isinstance(result.get("eagle"), str):
        draft = result["eagle"]
    elif drafter == "ngram":
        draft = "prompt lookup"
    target = result.get("target")
    return AlphaSource("probe", where, target if isinstance(target, str) else None,
                       draft if isinstance(draft, str) else None, drafter, tuple(domains),
                       temperature, draft_sample)


def from_metrics(where: str, labels: Sequence[dict[str, str]]) -> AlphaSource:
    """vLLM's counters: they name the target (``model_name``), never the draft."""
    names = sorted({row["model_name"] for row in labels if "model_name" in row})
    return AlphaSource("metrics", where, ", ".join(names) if names else None,
                       domains=tuple(", ".join(f"{k}={v}" for k, v in row.items())
                                     for row in labels if len(labels) > 1))
