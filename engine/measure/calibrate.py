"""``specscope calibrate``: alpha and k from a vLLM server's ``/metrics``.

vLLM counts, per ``model_name``/``engine`` label set (DESIGN.md, "vLLM"):

    vllm:spec_decode_num_drafts_total                        cycles that drafted
    vllm:spec_decode_num_draft_tokens_total                  draft tokens proposed
    vllm:spec_decode_num_accepted_tokens_total               draft tokens accepted
    vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}   accepted at 0-based i

One snapshot gives the figures since the server started; two (before and after) give the
window between them. From the counts: draft acceptance rate = accepted / draft tokens; mean
acceptance length = 1 + accepted / drafts; acceptance at position i = per_pos[i] / drafts; and
the counted alpha of this project, accepted / trials, where a cycle's trials are its accepted
tokens plus one unless it accepted all k: trials = accepted + drafts - per_pos[k-1]. Without
per-position counts the alpha is solved from the mean acceptance length under the i.i.d. model
and labelled so.

The text is parsed by ``prometheus_client.parser``, the Prometheus client library's own parser.
Anything it cannot read, and counters that are NaN, infinite, negative, inconsistent or that
go backwards between the snapshots, end in :class:`MetricsError` with a readable message.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from engine.analytic import theory

PREFIX = "vllm:spec_decode_"
DRAFTS = "num_drafts"
DRAFT_TOKENS = "num_draft_tokens"
ACCEPTED = "num_accepted_tokens"
PER_POS = "num_accepted_tokens_per_pos"
COUNTERS = (DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS)
MAX_METRICS_BYTES = 4 * 1024 * 1024  # a real /metrics page is tens of KB
MAX_POSITIONS = 64


class MetricsError(ValueError):
    """Text that does not give usable speculative-decoding counters; says why."""


@dataclass
class Counts:
    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    per_position: dict[int, float] = field(default_factory=dict)


@dataclass
class CalibrationRow:
    """One label set (``model_name``, ``engine``, ...): the counts and what they give."""

    labels: dict[str, str]
    drafts: float
    draft_tokens: float
    accepted: float
    per_position_counts: list[float]
    k: int
    draft_acceptance_rate: float
    mean_acceptance_length: float
    per_position_acceptance: list[float]
    alpha_counted: float
    alpha_source: str  # "per-position counts" or "mean acceptance length (i.i.d. model)"

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.labels.items()) or "(no labels)"


@dataclass
class Calibration:
    rows: list[CalibrationRow]
    window: bool  # two snapshots: the figures are for the window between them
    notices: list[str] = field(default_factory=list)


def read_counts(text: str, name: str = "the metrics") -> dict[tuple, Counts]:
    """The speculative-decoding counters of one snapshot, by label set (``position`` aside)."""
    if len(text.encode("utf-8", "replace")) > MAX_METRICS_BYTES:
        raise MetricsError(f"{name} are over {MAX_METRICS_BYTES // (1024 * 1024)} MB; "
                           "paste one server's /metrics page")
    counts: dict[tuple, Counts] = {}
    try:
        families = list(text_string_to_metric_families(text))
    except Exception:  # noqa: BLE001 - the parser raises several kinds on bad text
        raise MetricsError(f"{name} are not Prometheus text format: "
                           f"{_first_bad_line(text)}") from None
    for family in families:
        for sample in family.samples:
            counter = _counter(sample.name)
            if counter is None:
                continue
            value = sample.value
            labels = dict(sample.labels)
            where = f"{sample.name}{_labels(labels)} in {name}"
            if math.isnan(value) or math.isinf(value):
                raise MetricsError(f"{where} is {value}: a counter must be a finite number")
            if value < 0:
                raise MetricsError(f"{where} is {value:g}: a counter cannot be negative")
            position = labels.pop("position", None)
            c = counts.setdefault(tuple(sorted(labels.items())), Counts())
            if counter == PER_POS:
                if position is None or not position.isdigit() or int(position) >= MAX_POSITIONS:
                    raise MetricsError(f"{where}: position must be a number 0..{MAX_POSITIONS - 1}")
                c.per_position[int(position)] = value
            else:
                setattr(c, {DRAFTS: "drafts", DRAFT_TOKENS: "draft_tokens",
                            ACCEPTED: "accepted"}[counter], value)
    if not counts:
        raise MetricsError(f"{name} hold no {PREFIX}* counters: was the server started with "
                           "a speculative config, and is this its /metrics page?")
    return counts


def _first_bad_line(text: str) -> str:
    """Where the text stops being Prometheus text, and what is wrong there, in words (the
    parser's own exception says neither)."""
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            list(text_string_to_metric_families(line + "\n"))
        except Exception:  # noqa: BLE001 - this is the line the parser cannot read
            return f"line {number} ({_shown(line)}) {_what_is_wrong(line.strip())}"
    return ("the lines read one by one, but not together (a metric's lines interleaved with "
            "another's, or a # TYPE after its samples?)")


def _shown(line: str) -> str:
    line = line.strip()
    return repr(line if len(line) <= 60 else line[:57] + "...")


def _what_is_wrong(line: str) -> str:
    if line.startswith("#"):
        return ("is a comment the format gives a meaning to (# HELP name text, or # TYPE name "
                "counter|gauge|histogram|summary|untyped) but does not follow it")
    if line.count("{") != line.count("}"):
        return "opens its labels with { and does not close them with }"
    if "{" in line and not _labels_ok(line[line.index("{") + 1 : line.rindex("}")]):
        return 'has labels that are not name="value" pairs separated by commas'
    parts = (line.rsplit("}", 1)[1] if "}" in line else line.split(None, 1)[-1]).split()
    if "{" not in line and len(line.split()) < 2 or not parts:
        return "has a metric name but no value after it"
    try:
        float(parts[0])
    except ValueError:
        return (f"has {_shown(parts[0])} where its value should be: a sample line is a name, "
                'optional {label="value"} pairs, then a number')
    return 'is not a sample line: a name, optional {label="value"} pairs, a number, and an ' \
           "optional timestamp"


def _labels_ok(inside: str) -> bool:
    pair = r'\s*[A-Za-z_][A-Za-z0-9_]*\s*=\s*"(?:[^"\\]|\\.)*"\s*'
    return re.fullmatch(rf"(?:{pair}(?:,{pair})*,?)?\s*", inside) is not None


def _counter(sample_name: str) -> str | None:
    """Which counter a sample is (``_total`` samples only; ``_created`` is a timestamp)."""
    if not sample_name.startswith(PREFIX) or not sample_name.endswith("_total"):
        return None
    base = sample_name[len(PREFIX):-len("_total")]
    return base if base in COUNTERS else None


def _labels(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else ""


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
                early = Counts()
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


def _difference(early: Counts, late: Counts, label: str) -> Counts:
    def delta(a: float, b: float, what: str) -> float:
        if b < a:
            raise MetricsError(
                f"{label}: {what} went backwards between the snapshots ({a:g} then {b:g}); "
                "was the server restarted, or are the snapshots in the wrong order?")
        return b - a

    return Counts(
        drafts=delta(early.drafts, late.drafts, "drafts"),
        draft_tokens=delta(early.draft_tokens, late.draft_tokens, "draft tokens"),
        accepted=delta(early.accepted, late.accepted, "accepted tokens"),
        per_position={i: delta(early.per_position.get(i, 0.0), v, f"position {i}")
                      for i, v in late.per_position.items()},
    )


def _row(labels: dict[str, str], c: Counts) -> CalibrationRow:
    where = ", ".join(f"{k}={v}" for k, v in labels.items()) or "(no labels)"
    if c.accepted > c.draft_tokens:
        raise MetricsError(f"{where}: more tokens accepted ({c.accepted:g}) than drafted "
                           f"({c.draft_tokens:g}); these are not consistent counters")
    per_pos = [c.per_position.get(i, 0.0) for i in range(len(c.per_position))]
    if c.per_position and sorted(c.per_position) != list(range(len(c.per_position))):
        raise MetricsError(f"{where}: positions {sorted(c.per_position)} are not 0..k-1")
    rising = any(later > earlier for earlier, later in zip(per_pos, per_pos[1:], strict=False))
    if rising or any(x > c.drafts for x in per_pos):
        raise MetricsError(f"{where}: per-position counts must fall from position 0 on and "
                           "never exceed the drafts")
    k = len(per_pos) or max(1, round(c.draft_tokens / c.drafts))
    mean_accepted = c.accepted / c.drafts
    if per_pos:
        trials = c.accepted + c.drafts - per_pos[-1]
        alpha = c.accepted / trials if trials else 1.0
        source = "per-position counts"
    else:
        alpha = solve_alpha(mean_accepted, k)
        source = "mean acceptance length (i.i.d. model)"
    return CalibrationRow(
        labels=labels,
        drafts=c.drafts,
        draft_tokens=c.draft_tokens,
        accepted=c.accepted,
        per_position_counts=per_pos,
        k=k,
        draft_acceptance_rate=c.accepted / c.draft_tokens if c.draft_tokens else 0.0,
        mean_acceptance_length=1.0 + mean_accepted,
        per_position_acceptance=[x / c.drafts for x in per_pos],
        alpha_counted=alpha,
        alpha_source=source,
    )


def solve_alpha(mean_accepted: float, k: int) -> float:
    """The alpha whose expected accepted drafts per cycle at ``k`` is ``mean_accepted``."""
    if mean_accepted >= k:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(60):  # expected_accepted rises with alpha: bisect
        mid = (low + high) / 2
        low, high = (mid, high) if theory.expected_accepted(mid, k) < mean_accepted else (low, mid)
    return (low + high) / 2


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
        positions = " ".join(f"{x:.2f}" for x in r.per_position_acceptance) or "n/a"
        alpha = f"{r.alpha_counted:.3f}" + ("" if r.per_position_counts else " (i.i.d. fit)")
        lines.append(f"| {r.label} | {r.k} | {r.drafts:g} | {r.draft_acceptance_rate:.3f} "
                     f"| {r.mean_acceptance_length:.2f} | {alpha} | {positions} |")
    return "\n".join(lines + [""] + calibration.notices) + "\n"
