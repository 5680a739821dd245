"""The ``probe`` and ``calibrate`` subcommands of ``specscope`` (see :mod:`engine.cli`); what
runs through vLLM (``calibrate``, ``probe --engine vllm``) is in :mod:`engine.serving.cli`.

    specscope probe scripture jargon prompts.jsonl --temperatures 0,0.7,1 --k 4
    specscope probe lookup scripture --drafter model,ngram   (both drafters side by side)
    specscope probe measurements/eagle/heldout_prompts.jsonl --drafter model,ngram,eagle,medusa
    specscope calibrate before.txt [after.txt]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from engine.analytic.drafters import DRAFTER_NAMES, DRAFTER_WORDS
from engine.cli_options import add_drafter_options, add_pair_options


def drafter_list(text: str) -> list[str]:
    """One of ``DRAFTER_NAMES``, or several comma-separated ("model,ngram,eagle")."""
    names = list(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    if not names or any(n not in DRAFTER_NAMES for n in names):
        raise ValueError(f"--drafter takes {', '.join(DRAFTER_NAMES)}, or several "
                         f"comma-separated ({','.join(DRAFTER_NAMES)}); got {text!r}")
    return names


def add_parsers(sub, d: dict, float_list) -> None:
    from engine.measure.prompt_sets import BUILTIN_SETS

    probe = sub.add_parser(
        "probe", help="alpha on your own prompts, by domain and temperature",
        description="Measure alpha, c, v and the best k on prompts, by domain and temperature. "
                    f"SOURCES: built-in sets ({', '.join(BUILTIN_SETS)}) or prompt files "
                    '(JSONL: {"text": ..., "domain": ...} per line; or one prompt per line).')
    probe.add_argument("sources", nargs="*", default=list(BUILTIN_SETS),
                       help="built-in set names or prompt files (default: all built-in sets)")
    probe.add_argument("--pair", help=f"a pair from SPECSCOPE_PAIRS ({', '.join(d['pairs'])})")
    add_pair_options(probe, None, None)
    add_drafter_options(probe, several=True, help_note=", with the winner of each domain")
    probe.add_argument("--draft-sample", choices=["probabilistic", "greedy"],
                       default="probabilistic",
                       help="how the draft model picks its tokens, as vLLM's "
                            "draft_sample_method: probabilistic samples from q (accepted with "
                            "min(1, p/q)); greedy drafts the argmax (q one-hot, accepted with "
                            "p(x)). Alpha differs: probe the one you deploy")
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
    """``specscope probe`` on our engine (``--engine vllm`` and ``calibrate`` are run by
    :mod:`engine.serving.cli`)."""
    return _probe(args, argv, d)


def read_text(path: Path) -> str:
    if str(path) == "-":
        return sys.stdin.read()
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None


def _pair_names(args, d: dict) -> tuple[str, str]:
    if args.pair is not None:
        if args.pair not in d["pairs"]:
            raise ValueError(f"--pair {args.pair!r} is not one of {', '.join(d['pairs'])}")
        spec = d["pairs"][args.pair]
        return args.target or spec.target, args.draft or spec.draft
    return args.target or d["target"], args.draft or d["draft"]


def _probe(args, argv: list[str] | None, d: dict) -> int:
    from dataclasses import replace

    from engine.decoder.drafter_spec import options_of
    from engine.measure.probe import probe

    drafters = drafter_list(args.drafter)
    options = {name: options_of(args, name) for name in drafters}  # checked before loading
    pair, prompts, notices, config, target, draft = prepare_probe(args, d)
    command = "specscope " + " ".join(argv if argv is not None else sys.argv[1:])
    results = []
    for name in drafters:
        cfg = replace(config, **options[name])
        result = measure(probe(pair, prompts, cfg), prompts, cfg, args, "specscope", target,
                         draft or "", notices)
        if result is None:
            return 130
        results.append(result)
    if drafters == ["model", "ngram"]:
        _report_both(*results, args, command)
    elif len(results) > 1:
        _report_many(results, args, command)
    else:
        report(results[0], args, command)
    return 0 if all(r.complete for r in results) else 130


def prepare_probe(args, d: dict):
    """The probe's pair, fitted prompts, notices, config and model names, from its arguments
    (no draft model when prompt lookup is the only drafter)."""
    from transformers.utils import logging as hf_logging

    from engine.decoder.loading import load_pair, set_threads
    from engine.measure.probe import ProbeConfig, fit_prompts
    from engine.measure.prompt_sets import load_source

    drafters = drafter_list(getattr(args, "drafter", "model"))
    if args.engine == "vllm" and len(drafters) > 1:
        raise ValueError("--engine vllm probes one drafter per server: --drafter model or "
                         "--drafter ngram")
    if args.engine == "vllm" and drafters[0] in ("eagle", "medusa"):
        raise ValueError(f"--engine vllm does not probe the {DRAFTER_WORDS[drafters[0]]} yet: "
                         "probe them with --engine specscope")
    config = ProbeConfig(k=args.k, temperatures=args.temperatures, top_p=args.top_p,
                         max_new_tokens=args.max_new_tokens, seed=args.seed,
                         bootstrap=args.bootstrap,
                         draft_sample=getattr(args, "draft_sample", "probabilistic")).validate()
    if args.engine == "vllm" and drafters == ["ngram"]:
        from dataclasses import replace

        from engine.decoder.ngram import PromptLookup

        lookup = PromptLookup(args.prompt_lookup_min, args.prompt_lookup_max).validate()
        config = replace(config, lookup=lookup)
    if args.max_prompts is not None and args.max_prompts < 1:
        raise ValueError("--max-prompts must be at least 1")
    prompts = [p for source in args.sources
               for p in load_source(source)[: args.max_prompts]]
    target, draft = _pair_names(args, d)
    if "model" not in drafters:
        draft = None  # only the draft model is a draft model
    set_threads(None, args.device)
    hf_logging.disable_progress_bar()
    pair = load_pair(target, draft, device=args.device, cuda_graphs=args.cuda_graphs)
    prompts, notices = fit_prompts(pair, prompts, config)
    return pair, prompts, notices, config, target, draft


def measure(measures_of, prompts, config, args, engine: str, target: str, draft: str,
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


def report(result, args, command: str, extra: dict | None = None) -> None:
    from engine.measure.probe import markdown, report_json

    report = report_json(result) | {"command": command} | (extra or {})
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=1) if args.json else markdown(result, command), end="\n")


def _report_both(model, ngram, args, command: str) -> None:
    from engine.measure import probe_compare

    result = probe_compare.comparison_json(model, ngram) | {"command": command}
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1) if args.json
          else probe_compare.markdown(model, ngram, command), end="\n")


def _report_many(results, args, command: str) -> None:
    from engine.measure import probe_compare

    result = probe_compare.many_json(results) | {"command": command}
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1) if args.json
          else probe_compare.markdown_many(results, command), end="\n")


def add_costs_parser(sub, d: dict, batches_type) -> None:
    """``specscope costs``: the loop's step in parts, for the plan (engine.measure.loop_costs)."""
    costs = sub.add_parser(
        "costs", help="a step's costs measured through the decoding loop, for specscope plan",
        description="Time the batched decoding loop at each batch size and draft length k "
                    "(0..--k-max) in parts: draft passes, the target pass and the loop's own "
                    "time outside them. Writes the costs file specscope plan --costs reads.")
    costs.add_argument("--engine", choices=["specscope"], default="specscope",
                       help="the engine whose loop is timed (vLLM's costs: specscope sweep "
                            "--engine vllm --costs-out)")
    costs.add_argument("--batch", type=batches_type, default=[1, 2, 4, 8, 16, 32, 64],
                       help="batch sizes (default 1,2,4,8,16,32,64)")
    costs.add_argument("--k-max", type=int, default=4, help="the longest draft timed (default 4)")
    add_pair_options(costs, d["target"], d["draft"], k=None)
    add_drafter_options(costs)
    costs.add_argument("--new-tokens", type=int, default=32, help="tokens a row per run")
    costs.add_argument("--repeats", type=int, default=3, help="runs of each (batch, k)")
    costs.add_argument("--temperature", type=float, default=0.0)
    costs.add_argument("--prompts", default=None,
                       help="a built-in prompt set or a prompt file (default: the pair's "
                            "held-out prompts)")
    costs.add_argument("--threads", type=int, default=None, help="CPU threads (default: 1)")
    costs.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    costs.add_argument("--clock", choices=["wall", "cpu"], default="cpu",
                       help="CPU time of the decoding thread (the default: steady on a shared "
                            "CPU) or wall time")
    costs.add_argument("--out", type=Path, required=True, help="the costs file to write")


def run_costs(args) -> int:
    """``specscope costs``: measure, write the costs file, print its table."""
    from engine.measure.loop_costs import costs_file, measure, table

    def log(message: str) -> None:
        print(f"specscope costs: {message}", file=sys.stderr, flush=True)

    if args.new_tokens < 2 or args.repeats < 1 or not 0 <= args.k_max <= 16 \
            or args.temperature < 0:
        print("specscope costs: error: --new-tokens must be at least 2, --repeats at least 1, "
              "--k-max 0..16 and --temperature at least 0", file=sys.stderr)
        return 2
    from engine.measure.batch_sweep import load_drafting, sweep_prompts

    try:
        prompts = sweep_prompts(args)
    except ValueError as error:
        print(f"specscope costs: error: {error}", file=sys.stderr)
        return 2
    threads, pair, drafter, draft = load_drafting(args)
    log(f"{len(args.batch)} batch sizes x k = 0..{args.k_max} x {args.repeats} repeats, "
        f"{args.new_tokens} new tokens a row, {threads} thread(s), {args.clock} clock")
    medians = measure(pair, prompts, args.batch, args.k_max, args.new_tokens, args.repeats,
                      args.temperature, args.clock == "cpu", drafter, log)
    where = "CPU" if pair.device.type == "cpu" else str(pair.device)
    name = Path(draft).name if drafter.kind == "model" else draft
    meta = {"label": f"{Path(args.target).name} / {name}, measured through the loop",
            "hardware": f"this machine ({where}, {str(pair.dtype).removeprefix('torch.')}, "
                        f"{threads} torch thread(s), specscope engine)",
            "target": args.target, "draft": draft,
            "drafter": args.drafter, "clock": args.clock, "temperature": args.temperature,
            "new_tokens": args.new_tokens, "repeats": args.repeats, "threads": threads,
            "command": "specscope " + " ".join(sys.argv[1:])}
    try:
        data = costs_file(medians, args.batch, args.k_max, meta)
    except ValueError as error:
        print(f"specscope costs: error: {error}", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(table(data))
    log(f"wrote {args.out}")
    return 0
