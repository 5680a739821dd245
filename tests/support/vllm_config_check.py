"""Run by vLLM's own Python (.venv-vllm), not by the test suite's: vLLM builds its configs from
the engine arguments ``specscope plan`` printed, as ``LLM(**args)`` would before it loads
anything, and reports what it made of them.

    python vllm_config_check.py CASES.json   (a list of {"name", "args"} or {"name", "argv"})

For each case: ``EngineArgs(**args, skip_tokenizer_init=True).create_engine_config()``, or for
``argv`` (a server's command line after the module) vLLM's own server parser
(``make_arg_parser``, ``validate_parsed_serve_args``, ``EngineArgs.from_cli_args``) first, the
tensor-parallel sizes of target and draft, the method and the draft's checkpoint, the
draft-model proposer's own placement check (``DraftModelProposer._raise_if_draft_tp_mismatch``,
on the config it would read; EAGLE's proposer has none), and the k
vLLM's scheduler looks up at every batch from 1 to max_num_seqs
(``build_dynamic_sd_schedule_lookup``). Prints one JSON list; an error is reported per case.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace


def engine_args_of(argv: list[str]):
    """``EngineArgs`` as ``python -m vllm.entrypoints.openai.api_server ARGV`` builds them."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.entrypoints.launchers.cli_args import (
        make_arg_parser,
        validate_parsed_serve_args,
    )
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parsed = make_arg_parser(FlexibleArgumentParser()).parse_args(argv)
    validate_parsed_serve_args(parsed)
    parsed.skip_tokenizer_init = True
    return EngineArgs.from_cli_args(parsed)


def check(args: dict | None = None, argv: list[str] | None = None) -> dict:
    from vllm.engine.arg_utils import EngineArgs
    from vllm.v1.spec_decode.draft_model import DraftModelProposer
    from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

    engine_args = (engine_args_of(argv) if argv is not None
                   else EngineArgs(**args, skip_tokenizer_init=True))
    config = engine_args.create_engine_config()
    spec = config.speculative_config
    out = {"tensor_parallel_size": config.parallel_config.tensor_parallel_size,
           "data_parallel_size": config.parallel_config.data_parallel_size,
           "max_num_seqs": config.scheduler_config.max_num_seqs,
           "max_model_len": config.model_config.max_model_len,
           "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
           "gpu_memory_utilization": config.cache_config.gpu_memory_utilization}
    if spec is None:
        return out
    out |= {"method": spec.method, "draft_model": spec.model,
            "draft_tensor_parallel_size": spec.draft_parallel_config.tensor_parallel_size,
            "num_speculative_tokens": spec.num_speculative_tokens,
            "draft_sample_method": spec.draft_sample_method,
            "schedule": spec.num_speculative_tokens_per_batch_size}
    if spec.method != "draft_model":  # EAGLE's proposer has no placement check
        out["proposer"] = f"no placement check for {spec.method}"
    else:
        try:  # the draft-model proposer's own check, on the config its worker would get
            DraftModelProposer._raise_if_draft_tp_mismatch(
                SimpleNamespace(speculative_config=spec))
            out["proposer"] = "accepted"
        except ValueError as error:
            out["proposer"] = f"refused: {error}"
    seqs = out["max_num_seqs"]
    if spec.num_speculative_tokens_per_batch_size is not None:
        out["lookup"] = build_dynamic_sd_schedule_lookup(
            spec.num_speculative_tokens_per_batch_size, seqs, spec.num_speculative_tokens)
    else:
        out["lookup"] = [0] + [spec.num_speculative_tokens] * seqs
    return out


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as file:
        cases = json.load(file)
    results = []
    for case in cases:
        try:
            results.append({"name": case["name"], **check(case.get("args"), case.get("argv"))})
        except Exception as error:  # reported per case: the test says which and why
            results.append({"name": case["name"], "error": f"{type(error).__name__}: {error}"})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
