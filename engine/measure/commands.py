"""The ``probe`` and ``calibrate`` subcommands of ``specscope`` (see :mod:`engine.cli`).

    specscope probe scripture jargon prompts.jsonl --temperatures 0,0.7,1 --k 4
    specscope probe lookup scripture --drafter model,ngram   (both drafters side by side)
    specscope calibrate before.txt [after.txt]
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

DRAFTERS = ("model", "ngram")


def drafter_list(text: str) -> list[str]:
    """"model", "ngram" or "model,ngram"."""
    names = list(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    if not names or any(n not in DRAFTERS for n in names):
        raise ValueError(f"--drafter takes model, ngram or model,ngram; got {text!r}")
    return names


def add_parsers(sub, d: dict, float_list) -> None:
    from engine.decoder.ngram import PROMPT_LOOKUP_MAX, PROMPT_LOOKUP_MIN
    from engine.measure.prompt_sets import BUILTIN_SETS

    probe = sub.add_parser(
        "probe", help="alpha on your own prompts, by domain and temperature",
        description="Measure alpha, c, v and the best k on prompts, by domain and temperature. "
                    f"SOURCES: built-in sets ({', '.join(BUILTIN_SETS)}) or prompt files "
                    '(JSONL: {"text": ..., "domain": ...} per line; or one prompt per line).')
    probe.add_argument("sources", nargs="*", default=list(BUILTIN_SETS),
                       help="built-in set names or prompt files (default: all built-in sets)")
    probe.add_argument("--pair", help=f"a pair from SPECSCOPE_PAIRS ({', '.join(d['pairs'])})")
    probe.add_argument("--target", help="path or Hugging Face id (default: the default pair's)")
    probe.add_argument("--draft", help="path or Hugging Face id (default: the default pair's)")
    probe.add_argument("--k", type=int, default=4, help="draft tokens per cycle")
    probe.add_argument("--drafter", default="model",
                       help="model (the draft model), ngram (prompt lookup) or model,ngram: "
                            "both side by side, with the winner of each domain")
    probe.add_argument("--prompt-lookup-min", type=int, default=PROMPT_LOOKUP_MIN,
                       help=f"smallest n-gram prompt lookup matches (default {PROMPT_LOOKUP_MIN})")
    probe.add_argument("--prompt-lookup-max", type=int, default=PROMPT_LOOKUP_MAX,
                       help=f"largest n-gram prompt lookup matches (default {PROMPT_LOOKUP_MAX})")
    probe.add_argument("--temperatures", type=float_list, default=[0.0, 0.7, 1.0],
                       help="comma-separated (default 0,0.7,1; 0 = greedy)")
    probe.add_argument("--top-p", type=float, default=1.0)
    probe.add_argument("--max-new-tokens", type=int, default=32, help="per prompt")
    probe.add_argument("--max-prompts", type=int, default=None,
                       help="use at most this many prompts of each source")
    probe.add_argument("--seed", type=int, default=0,
                       help="sampling (prompt i uses seed + i) and the bootstrap")
    probe.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples")
    probe.add_argument("--device", default=d["device"])
    probe.add_argument("--json", action="store_true",
                       help="print the JSON result (rows and chart data) instead of Markdown")
    probe.add_argument("--out", type=Path, help="also write the JSON result to this file")
    probe.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    probe.add_argument("--engine", choices=["specscope", "vllm"], default="specscope",
                       help="specscope's engine (the default), or a vLLM server: its counters "
                            "give acceptance by domain and temperature")
    probe.add_argument("--url", default=d.get("vllm_url"),
                       help="with --engine vllm: a running server with speculation (default: "
                            "SPECSCOPE_VLLM_URL); without it, specscope starts one")
    probe.add_argument("--no-compare", dest="compare", action="store_false",
                       help="with --engine vllm: skip probing the same prompts with specscope's "
                            "engine, which warns when vLLM accepts far fewer drafts")

    cal = sub.add_parser(
        "calibrate", help="alpha and k from a vLLM server's /metrics text",
        description="Read vllm:spec_decode_* counters from one /metrics snapshot, or the "
                    "window between two (before, after).")
    cal.add_argument("before", type=Path, help="a saved /metrics page ('-' for stdin)")
    cal.add_argument("after", type=Path, nargs="?", help="a later snapshot: the window between")
    cal.add_argument("--json", action="store_true")


def run(args, argv: list[str] | None, d: dict) -> int:
    if args.command == "calibrate":
        return _calibrate(args)
    return _probe(args, argv, d)


def _read_text(path: Path) -> str:
    if str(path) == "-":
        return sys.stdin.read()
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None


def _calibrate(args) -> int:
    from engine.measure.calibrate import calibrate, markdown

    before = _read_text(args.before)
    after = _read_text(args.after) if args.after else None
    result = calibrate(before, after)
    if args.json:
        print(json.dumps(asdict(result), indent=1))
    else:
        print(markdown(result), end="")
    return 0


def _pair_names(args, d: dict) -> tuple[str, str]:
    if args.pair is not None:
        if args.pair not in d["pairs"]:
            raise ValueError(f"--pair {args.pair!r} is not one of {', '.join(d['pairs'])}")
        spec = d["pairs"][args.pair]
        return args.target or spec.target, args.draft or spec.draft
    return args.target or d["target"], args.draft or d["draft"]


def _probe(args, argv: list[str] | None, d: dict) -> int:
    from dataclasses import replace

    from transformers.utils import logging as hf_logging

    from engine.decoder.loading import load_pair, set_threads
    from engine.decoder.ngram import PromptLookup
    from engine.measure.probe import ProbeConfig, fit_prompts, probe
    from engine.measure.prompt_sets import load_source

    drafters = drafter_list(args.drafter)
    lookup = PromptLookup(args.prompt_lookup_min, args.prompt_lookup_max).validate()
    config = ProbeConfig(k=args.k, temperatures=args.temperatures, top_p=args.top_p,
                         max_new_tokens=args.max_new_tokens, seed=args.seed,
                         bootstrap=args.bootstrap).validate()
    if args.engine == "vllm" and "ngram" in drafters:
        raise ValueError("--engine vllm probes the draft model only; prompt lookup through "
                         "vLLM is not built yet")
    if args.max_prompts is not None and args.max_prompts < 1:
        raise ValueError("--max-prompts must be at least 1")
    prompts = [p for source in args.sources
               for p in load_source(source)[: args.max_prompts]]
    target, draft = _pair_names(args, d)
    if drafters == ["ngram"]:
        draft = None  # prompt lookup needs no draft model
    set_threads(None, args.device)
    hf_logging.disable_progress_bar()
    pair = load_pair(target, draft, device=args.device, cuda_graphs=args.cuda_graphs)
    prompts, notices = fit_prompts(pair, prompts, config)
    command = "specscope " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.engine == "vllm":
        return _probe_vllm(args, pair, prompts, notices, config, target, draft, command)
    results = []
    for name in drafters:
        cfg = replace(config, lookup=lookup if name == "ngram" else None)
        result = _measure(probe(pair, prompts, cfg), prompts, cfg, args, "specscope", target,
                          draft or "", notices)
        if result is None:
            return 130
        results.append(result)
    if len(results) == 2:
        _report_both(*results, args, command)
    else:
        _report(results[0], args, command)
    return 0 if all(r.complete for r in results) else 130


def _measure(measures_of, prompts, config, args, engine: str, target: str, draft: str,
             notices: list[str]):
    """Pool what ``measures_of`` yields, with a progress bar; Ctrl-C keeps what came so far.
    None when nothing was measured."""
    from tqdm import tqdm

    from engine.measure.probe import plan, summarize_probe

    planned = len(plan(prompts, config))
    measures = []
    bar = tqdm(total=planned, unit="prompt", file=sys.stderr, disable=args.quiet,
               desc=f"specscope probe ({engine})")
    try:
        for m in measures_of:
            measures.append(m)
            bar.update()
            bar.set_postfix_str(f"{m.domain} T={m.temperature:g}", refresh=False)
    except KeyboardInterrupt:
        print(f"\nspecscope probe: interrupted; {len(measures)} of {planned} prompt runs "
              "measured, here they are", file=sys.stderr)
    finally:
        bar.close()
    if not measures:
        print("specscope probe: nothing was measured", file=sys.stderr)
        return None
    return summarize_probe(measures, config, engine=engine, target=target, draft=draft,
                           runs_planned=planned, notices=notices)


def _report(result, args, command: str, extra: dict | None = None) -> None:
    from engine.measure.probe import markdown, report_json

    report = report_json(result) | {"command": command} | (extra or {})
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=1) if args.json else markdown(result, command), end="\n")


def _report_both(model, ngram, args, command: str) -> None:
    from engine.measure import probe_compare

    report = probe_compare.comparison_json(model, ngram) | {"command": command}
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=1) if args.json
          else probe_compare.markdown(model, ngram, command), end="\n")


def _probe_vllm(args, pair, prompts, notices, config, target, draft, command) -> int:
    """The probe through a vLLM server (``--url``, or one started for the pair), then, unless
    ``--no-compare``, the same prompts through our engine: a warning where vLLM accepts far
    fewer drafts."""
    from contextlib import ExitStack

    from engine.measure.probe import probe, report_json
    from engine.measure.vllm_client import VllmClient, VllmError
    from engine.measure.vllm_probe import NOT_AVAILABLE, acceptance_warnings, probe_vllm
    from engine.measure.vllm_server import ServerSpec, VllmServer

    prompt_ids = [list(pair.tokenizer(p.text).input_ids) for p in prompts]
    with ExitStack() as stack:
        if args.url:
            client = VllmClient(args.url)
            if not client.healthy():
                raise VllmError(f"the vLLM server at {client.url} does not answer /health")
        else:
            print(f"specscope probe: starting vLLM (k = {config.k}) ...", file=sys.stderr)
            client = stack.enter_context(VllmServer(ServerSpec(target, draft, k=config.k))).client
        result = _measure(probe_vllm(client, prompts, prompt_ids, config), prompts, config, args,
                          "vllm", target, draft, [*notices, NOT_AVAILABLE])
    if result is None:
        return 130
    extra = {}
    if args.compare and result.complete:
        ours = _measure(probe(pair, prompts, config), prompts, config, args, "specscope", target,
                        draft, list(notices))
        if ours is not None:
            warnings = acceptance_warnings(result, ours)
            result.notices += warnings or [
                "specscope's engine, on the same pair, prompts and settings, accepts no more "
                "than about as many drafts: nothing points at the deployment."]
            extra["reference"] = report_json(ours)
    _report(result, args, command, extra)
    return 0 if result.complete else 130
