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
                           f"{first_bad_line(text)}") from None
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
