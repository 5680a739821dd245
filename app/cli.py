"""``specscope``, the installed command: the engine's commands (:mod:`engine.cli`) and
``specscope serve``, the page, served exactly as ``make run`` serves it (``python -m
app.main``): the same SPECSCOPE_* settings, the same bounded server (:mod:`app.server`).
"""

from __future__ import annotations

import argparse
import sys

from engine import cli as engine_cli


def add_serve(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser(
        "serve", help="serve the page and the HTTP API (what `make run` does)",
        description="Serve the page and the HTTP API. Settings come from SPECSCOPE_* "
                    "environment variables, as for `make run`; --host and --port override "
                    "SPECSCOPE_HOST and SPECSCOPE_PORT.")
    # The defaults are the settings', read when the command runs (not for every --help).
    serve.add_argument("--host", help="the address to listen on (default: SPECSCOPE_HOST)")
    serve.add_argument("--port", type=int, help="the port (default: SPECSCOPE_PORT)")
    serve.add_argument("--reload", action="store_true",
                       help="restart when the code changes (for development: plain uvicorn, "
                            "without the server's head deadline and connection caps)")
    serve.set_defaults(run=run_serve)


def address(args: argparse.Namespace) -> tuple[str, int]:
    """``--host`` and ``--port``, else the settings (SPECSCOPE_HOST, SPECSCOPE_PORT)."""
    from engine.settings import Settings

    settings = Settings()
    return (settings.host if args.host is None else args.host,
            settings.port if args.port is None else args.port)


def run_serve(args: argparse.Namespace) -> int:
    import os

    args.host, args.port = address(args)
    # The app reads its settings from the environment, in this process or in the reloader's.
    os.environ["SPECSCOPE_HOST"], os.environ["SPECSCOPE_PORT"] = args.host, str(args.port)
    if args.reload:
        import uvicorn

        from engine.settings import REPO_ROOT

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
