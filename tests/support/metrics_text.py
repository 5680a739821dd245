"""Hypothesis strategy for the ``prometheus-text`` format of the calibrate schema: the
``/metrics`` page of one vLLM server running speculative decoding, at some moment.

Every snapshot comes from the same server (two engines, k = 3, fixed acceptance rates), at a
random time ``t`` since it started: its counters grow with ``t``, so two snapshots are a
valid before/after pair when the first was taken earlier (:func:`moment`). Around the counters
are other metric families, comments and formats the Prometheus text format allows.
"""

from __future__ import annotations

import re

from hypothesis import strategies as st

FORMAT = "prometheus-text"
# Per engine: drafts, draft tokens, accepted, accepted at positions 0..2, per unit of time.
RATES = {"0": (10, 30, 18, (8, 6, 4)), "1": (5, 15, 6, (3, 2, 1))}
SPEC = "vllm:spec_decode_num_"


def _counter(name: str, samples: list[tuple[str, float]], helped: bool) -> list[str]:
    lines = [f"# HELP {SPEC}{name}_total Spec decoding {name}."] if helped else []
    lines.append(f"# TYPE {SPEC}{name}_total counter")
    lines += [f"{SPEC}{name}_total{{{labels}}} {value!r}" for labels, value in samples]
    return lines


@st.composite
def snapshot(draw) -> str:
    t = draw(st.integers(1, 10**6))
    helped = draw(st.booleans())
    families = []
    for engine, (drafts, tokens, accepted, per_pos) in RATES.items():
        labels = f'engine="{engine}",model_name="m"'
        families += [
            _counter("drafts", [(labels, float(drafts * t))], helped),
            _counter("draft_tokens", [(labels, float(tokens * t))], helped),
            _counter("accepted_tokens", [(labels, float(accepted * t))], helped),
            _counter("accepted_tokens_per_pos", [
                (f'{labels},position="{i}"', float(n * t)) for i, n in enumerate(per_pos)],
                helped),
        ]
    other = draw(st.lists(st.tuples(
        st.from_regex(r"[a-z_][a-z0-9_]{0,20}", fullmatch=True),
        st.floats(0, 1e9, allow_nan=False)), max_size=4, unique_by=lambda o: o[0]))
    families += [[f"# TYPE specscope_other_{name} gauge", f"specscope_other_{name} {value!r}"]
                 for name, value in other]
    order = draw(st.permutations(range(len(families))))
    return "\n".join(line for i in order for line in families[i]) + "\n"


def moment(text: str) -> int:
    """The ``t`` a snapshot was taken at."""
    return int(float(re.search(rf'{SPEC}drafts_total{{engine="0"[^}}]*}} (\S+)', text)[1])) // 10


def in_order(body: dict) -> bool:
    """A before/after pair taken in that order (the schema says so in words)."""
    after = body.get("after")
    return not after or moment(after) > moment(body["before"])
