"""``specscope``, the installed command: the engine's commands (:mod:`engine.cli`) and
``specscope serve``, the page, served exactly as ``make run`` serves it (``python -m
app.main``): the same SPECSCOPE_* settings, the same bounded server (:mod:`app.server`).
"""

from __future__ import annotations

import argparse
import sys

from engine import cli as engine_cli
from engine.settings import REPO_ROOT, Settings


def add_serve(sub: argparse._SubParsersAction) -> None:
    settings = Settings()
    serve = sub.add_parser(
        "serve", help="serve the page and the HTTP API (what `make run` does)",
        description="Serve the page and the HTTP API. Settings come from SPECSCOPE_* "
                    "environment variables, as for `make run`; --host and --port override "
                    "SPECSCOPE_HOST and SPECSCOPE_PORT.")
    serve.add_argument("--host", default=settings.host,
                       help="the address to listen on (default: SPECSCOPE_HOST, %(default)s)")
    serve.add_argument("--port", type=int, default=settings.port,
                       help="the port (default: SPECSCOPE_PORT, %(default)s)")
    serve.add_argument("--reload", action="store_true",
                       help="restart when the code changes (for development: plain uvicorn, "
                            "without the server's read deadline and shutdown handling)")
    serve.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    import os

    # The app reads its settings from the environment, in this process or in the reloader's.
    os.environ["SPECSCOPE_HOST"], os.environ["SPECSCOPE_PORT"] = args.host, str(args.port)
    if args.reload:
        import uvicorn

        uvicorn.run("app.main:create_app", factory=True, host=args.host, port=args.port,
                    reload=True, reload_dirs=[str(REPO_ROOT / d) for d in ("app", "engine",
                                                                           "templates")])
        return 0
    from app.main import run

    run()
    return 0


def main(argv: list[str] | None = None) -> int:
    return engine_cli.main(argv, add_commands=add_serve)


if __name__ == "__main__":
    sys.exit(main())
