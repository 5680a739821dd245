"""Check the SGLang launch line ``specscope plan --tree`` prints against SGLang's own parser,
and keep the parser's option names for the suite (which has no SGLang).

    python3 -m venv /tmp/sglvenv && /tmp/sglvenv/bin/pip install --no-deps sglang==0.5.23 \\
        orjson psutil pybase64 triton pillow msgspec pyzmq ipython traitlets aiohttp multidict \\
        attrs yarl propcache aiohappyeyeballs aiosignal frozenlist
    PYTHONPATH=/tmp/sglvenv/lib/python3.11/site-packages .venv/bin/python \\
        tools/sglang_args_check.py [--write measurements/sglang/server_args.json]

SGLang needs CUDA to run; its argument parser (``sglang/srt/server_args.py``) imports on a CPU
with its pure-Python dependencies beside this project's torch. The line is parsed by
``ServerArgs.add_cli_args`` and ``ServerArgs.from_cli_args``; every speculative option must
come back as given.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    from sglang.srt.server_args import ServerArgs
    from sglang.version import __version__

    from engine.planner.drafters import eagle_head
    from engine.planner.inputs import PlanInputs
    from engine.planner.schedule import single
    from engine.planner.tree_plan import TreeShape, tree_report

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", type=Path, help="keep the parser's option names in this file")
    args = ap.parse_args()
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    options = sorted(o for a in parser._actions for o in a.option_strings if o.startswith("--"))
    if args.write:
        args.write.write_text(json.dumps({"sglang": __version__, "options": options},
                                         indent=0) + "\n")
    s = PlanInputs(models="llama-8b-1b", hardware="h100-sxm", engine="sglang").setting()
    report = tree_report(s, eagle_head(s), single(0.7), TreeShape.parse("5,4,8")[0], 64, 1)
    line = report["launch"][3:]  # after python -m sglang.launch_server
    parsed = ServerArgs.from_cli_args(parser.parse_args(line))
    checked = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 5,
               "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8}
    wrong = {k: getattr(parsed, k) for k, v in checked.items() if getattr(parsed, k) != v}
    print(f"SGLang {__version__}: {len(options)} options; the plan's line "
          f"{'parses as given' if not wrong else f'parses wrongly: {wrong}'}:\n"
          f"{report['launch_line']}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
