"""vLLM's speculative-decoding counters, read from its ``/metrics`` page.

vLLM counts, per ``model_name``/``engine`` label set (docs/design.md, "vLLM"):

    vllm:spec_decode_num_drafts_total                        cycles that drafted
    vllm:spec_decode_num_draft_tokens_total                  draft tokens proposed
    vllm:spec_decode_num_accepted_tokens_total               draft tokens accepted
    vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}   accepted at 0-based i

The text is parsed by ``prometheus_client.parser``, the Prometheus client library's own parser.
Anything it cannot read, and counters that are NaN, infinite or negative, end in
:class:`MetricsError` with a readable message. The calibration (:mod:`engine.serving.calibrate`)
and the client (:mod:`engine.serving.client`) both read the counters here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from engine.analytic import acceptance as estimators

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
class SpecCounters:
    """vLLM's speculative-decoding counters of one label set, or summed over label sets: the
    one type of every reader (the client, the calibration, the watch). ``per_position[i]``:
    drafts whose token at 0-based position ``i`` was accepted (its length is the server's
    k)."""

    drafts: float = 0
    draft_tokens: float = 0
    accepted: float = 0
    per_position: list[float] = field(default_factory=list)

    # The figures, from engine.analytic.acceptance: None where nothing was counted (no drafts).
    @property
    def draft_acceptance_rate(self) -> float | None:
        return estimators.draft_acceptance_rate(self.accepted, self.draft_tokens)

    @property
    def mean_acceptance_length(self) -> float | None:
        # vLLM counts a draft only for a step that proposed tokens
        return estimators.mean_acceptance_length(self.accepted, self.drafts)

    @property
    def per_position_acceptance(self) -> list[float | None]:
        return estimators.per_position_vllm(self.per_position, self.drafts)

    @property
    def alpha_counted(self) -> float | None:
        """None also without per-position counts (vLLM's fixed k is their number)."""
        return estimators.counted_alpha_vllm(self.accepted, self.drafts, self.per_position)

    def __add__(self, other: SpecCounters) -> SpecCounters:
        n = max(len(self.per_position), len(other.per_position))
        mine, theirs = _padded(self.per_position, n), _padded(other.per_position, n)
        return SpecCounters(self.drafts + other.drafts, self.draft_tokens + other.draft_tokens,
                            self.accepted + other.accepted,
                            [a + b for a, b in zip(mine, theirs, strict=True)])

    def __sub__(self, before: SpecCounters) -> SpecCounters:
        n = max(len(self.per_position), len(before.per_position))
        mine, theirs = _padded(self.per_position, n), _padded(before.per_position, n)
        return SpecCounters(self.drafts - before.drafts, self.draft_tokens - before.draft_tokens,
                            self.accepted - before.accepted,
                            [a - b for a, b in zip(mine, theirs, strict=True)])


def _padded(values: list[float], n: int) -> list[float]:
    return list(values) + [0] * (n - len(values))


@dataclass
class Page:
    """One ``/metrics`` page, read once: the counters by label set (``position`` aside),
    vLLM's gauges and counters the watch reads, and what the page held."""

    by_labels: dict[tuple, SpecCounters]
    generated: float | None = None  # vllm:generation_tokens_total, summed
    running: float | None = None  # vllm:num_requests_running, summed
    steps: float | None = None  # vllm:iteration_tokens_total_count: engine steps with output
    process_start: float | None = None  # process_start_time_seconds: a restart changes it
    vllm: bool = False  # any vllm:* sample
    present: frozenset[str] = frozenset()  # the speculative counters seen

    def total(self) -> SpecCounters:
        """The counters summed over label sets (one engine per server here)."""
        return sum(self.by_labels.values(), SpecCounters())


GENERATED = "vllm:generation_tokens_total"
RUNNING = "vllm:num_requests_running"
# vLLM observes one sample per engine step that gave any request a token (its
# iteration_tokens_total histogram): the count is the number of those steps.
STEPS = "vllm:iteration_tokens_total_count"
PROCESS_START = "process_start_time_seconds"


def read_page(text: str, name: str = "the metrics") -> Page:
    """The one parser of a ``/metrics`` page (see the module's docstring); MetricsError for a
    page too large, not Prometheus text, a counter or gauge that is not a finite number of at
    least 0, or per-position counters that are not positions 0..k-1."""
    if len(text.encode("utf-8", "replace")) > MAX_METRICS_BYTES:
        raise MetricsError(f"{name} are over {MAX_METRICS_BYTES // (1024 * 1024)} MB; "
                           "paste one server's /metrics page")
    try:
        families = list(text_string_to_metric_families(text))
    except Exception:  # noqa: BLE001 - the parser raises several kinds on bad text
        raise MetricsError(f"{name} are not Prometheus text format: "
                           f"{first_bad_line(text)}") from None
    groups: dict[tuple, dict] = {}
    gauges: dict[str, float] = {}
    present: set[str] = set()
    vllm, process_start = False, None
    for family in families:
        for sample in family.samples:
            value, labels = sample.value, dict(sample.labels)
            if sample.name == PROCESS_START and math.isfinite(value):
                process_start = value
            if not sample.name.startswith("vllm:"):
                continue
            vllm = True
            counter = _counter(sample.name)
            if counter is None and sample.name not in (GENERATED, RUNNING, STEPS):
                continue
            where = f"{sample.name}{_labels(labels)} in {name}"
            if math.isnan(value) or math.isinf(value):
                raise MetricsError(f"{where} is {value}: a counter must be a finite number")
            if value < 0:
                raise MetricsError(f"{where} is {value:g}: a counter cannot be negative")
            if counter is None:
                gauges[sample.name] = gauges.get(sample.name, 0.0) + value
                continue
            present.add(counter)
            position = labels.pop("position", None)
            c = groups.setdefault(tuple(sorted(labels.items())), {"per_position": {}})
            if counter == PER_POS:
                if position is None or not position.isdigit() or int(position) >= MAX_POSITIONS:
                    raise MetricsError(f"{where}: position must be a number 0..{MAX_POSITIONS - 1}")
                c["per_position"][int(position)] = value
            else:
                c[counter] = value
    by_labels = {key: _counters(c, key, name) for key, c in groups.items()}
    return Page(by_labels, gauges.get(GENERATED), gauges.get(RUNNING), gauges.get(STEPS),
                process_start, vllm, frozenset(present))


def _counters(c: dict, key: tuple, name: str) -> SpecCounters:
    positions = c["per_position"]
    if sorted(positions) != list(range(len(positions))):
        label = ", ".join(f"{k}={v}" for k, v in key) or "(no labels)"
        raise MetricsError(f"{label} in {name}: positions {sorted(positions)} are not 0..k-1")
    return SpecCounters(c.get(DRAFTS, 0.0), c.get(DRAFT_TOKENS, 0.0), c.get(ACCEPTED, 0.0),
                        [positions[i] for i in range(len(positions))])


def read_counts(text: str, name: str = "the metrics") -> dict[tuple, SpecCounters]:
    """The speculative-decoding counters of one snapshot, by label set (``position`` aside)."""
    counts = read_page(text, name).by_labels
    if not counts:
        raise MetricsError(f"{name} hold no {PREFIX}* counters: was the server started with "
                           "a speculative config, and is this its /metrics page?")
    return counts


def first_bad_line(text: str) -> str:
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
