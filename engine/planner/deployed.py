"""The k a plan deploys at each batch, read back from what ``specscope plan --json`` wrote: the
one reading ``sweep --schedule``, ``watch --plan`` and ``vllm serve --plan`` share (standard
library only).

What runs is the printed ``speculative_config``, not the plan's ranges: where a per-batch
schedule does not clear its margin the config is the best fixed k, and where the plan does
not speculate there is no config at all."""

from __future__ import annotations

EVERY_BATCH = 2**31 - 1  # the upper end of a fixed k's range when the plan names no batch


def deployed_ranges(data: object) -> list[list[int]] | None:
    """``[[lo, hi, k], ...]`` as the plan's config deploys them, or None when ``data`` is not
    a plan's JSON (no ``speculative_config`` key). A fixed k covers the planned batches
    (``plan.largest_batch``); no config is k = 0 there."""
    if not isinstance(data, dict) or "speculative_config" not in data:
        return None
    config = data["speculative_config"]
    plan = data.get("plan") if isinstance(data.get("plan"), dict) else {}
    largest = plan.get("largest_batch")
    hi = largest if isinstance(largest, int) and largest >= 1 else EVERY_BATCH
    if config is None:
        return [[1, hi, 0]]
    if not isinstance(config, dict):
        return None
    schedule = config.get("num_speculative_tokens_per_batch_size")
    if isinstance(schedule, list) and schedule:
        return schedule
    k = config.get("num_speculative_tokens")
    return [[1, hi, k]] if isinstance(k, int) else None
