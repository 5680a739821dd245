"""The FastAPI application: settings, lifespan, routers, static files.

``app`` is the ASGI convention's module-level application, for any ASGI server
(``uvicorn app.main:app``); importing this module reads the settings and nothing more: the
models load and the database opens in the lifespan, at startup. ``python -m app.main`` (``make
run``) serves the same app through app/server.py, which adds what only a server can bound.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from app.body_limits import BodyLimit
from app.errors import client_gone_handler, http_error_handler, validation_error_handler
from app.host_guard import HostGuard
from app.limits import RequestLimits
from app.parsing import Parsers
from app.preview import Renderer
from app.routes import (
    api,
    health,
    indexes,
    pages,
    plan,
    previews,
    roofline,
    runs,
    saved,
    saved_probes,
    traffic,
    validation,
    watch,
)
from app.run_queue import RunManager
from app.saved.archive import Archiver
from app.security import SecurityHeaders
from app.shutdown import on_shutdown_signal, stop_streams
from app.store import RunStore, StoreUnavailable
from app.strict_query import known_query_only
from app.watch.deployments import WatchService
from engine.decoder.loading import ModelPair, load_pair, set_threads
from engine.serving.watch.store import WatchStore, WatchStoreError
from engine.settings import REPO_ROOT, Settings

SWAGGER_VERSION = "5.35.0"
log = logging.getLogger("specscope")


def load_pairs(settings: Settings) -> dict[str, ModelPair]:
    set_threads(settings.torch_threads, settings.device)
    return {name: load_pair(spec.target, spec.draft, device=settings.device,
                            cuda_graphs=settings.cuda_graphs)
            for name, spec in settings.pairs.items()}


def load_heads(settings: Settings, pairs: dict[str, ModelPair]) -> dict[str, dict]:
    """Each pair's heads by drafter ("eagle", "medusa"), those its spec names a folder for."""
    from engine.decoder.eagle import load_head_for
    from engine.decoder.medusa import load_heads_for

    loaders = {"eagle": load_head_for, "medusa": load_heads_for}
    return {name: {kind: load(pairs[name], getattr(spec, kind))
                   for kind, load in loaders.items() if getattr(spec, kind)}
            for name, spec in settings.pairs.items()}


def open_store(settings: Settings) -> tuple[RunStore | None, str]:
    """The saved-runs database, or None and why: a broken file must not stop the page."""
    try:
        return RunStore(settings.db, settings.runs_kept, settings.max_run_bytes), ""
    except StoreUnavailable as error:
        log.error("saved runs are unavailable (%s): %s", settings.db, error)
        return None, str(error)


def open_watch_store(settings: Settings) -> tuple[WatchStore | None, str]:
    """The watch's history (in the same SQLite file as the saved runs), or None and why."""
    if not settings.watch_deployments:
        return None, ""
    try:
        return WatchStore(settings.db, settings.watch_kept), ""
    except WatchStoreError as error:
        log.error("%s", error)
        return None, str(error)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    not_open = "the server has not started"  # the stores open in the lifespan
    renderer = Renderer(settings.png_workers, settings.png_queue)  # started in the lifespan
    archiver = Archiver(None, settings, renderer, not_open)  # saves runs and probes
    parsers = Parsers()  # every /metrics text is parsed through these worker threads
    watcher = WatchService(settings, None, parsers, not_open if settings.watch_deployments
                           else "")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The PNG workers are forked first: from a process without models or other threads.
        renderer.start()
        # The database opens and the models load here, never at import time; the slider
        # page works without them.
        store, store_error = open_store(settings)
        app.state.store, app.state.store_error = store, store_error
        archiver.store, archiver.unavailable = store, store_error
        watch_store, watcher.store_error = open_watch_store(settings)
        watcher.store = watch_store
        manager = None
        if settings.load_models:
            try:
                pairs = await asyncio.to_thread(load_pairs, settings)
                heads = await asyncio.to_thread(load_heads, settings, pairs)
                manager = RunManager(pairs, settings.queue_size, settings.run_timeout_s,
                                     on_finished=archiver, heads=heads)
                app.state.runs = manager
            except Exception as error:  # noqa: BLE001 - a page without live runs beats no page
                log.exception("could not load the model pairs")
                app.state.load_error = f"the models could not be loaded ({error})"
        watcher.start()
        # Any ASGI server: at SIGTERM the runs end and /watch's streams close first, so the
        # server's wait for open responses is short (app/server.py does it too).
        loop = asyncio.get_running_loop()
        unhook = on_shutdown_signal(lambda: loop.call_soon_threadsafe(stop_streams, app.state))
        yield
        unhook()
        await watcher.stop()
        if watch_store is not None:
            watch_store.close()
        if manager is not None:
            await asyncio.to_thread(manager.close)
        if store is not None:
            store.close()
        await asyncio.to_thread(renderer.close)

    app = FastAPI(title="specscope", lifespan=lifespan, docs_url=None, redoc_url=None,
                  dependencies=[Depends(known_query_only)])
    app.state.settings = settings
    app.state.store, app.state.store_error = None, not_open
    app.state.archiver, app.state.renderer = archiver, renderer
    app.state.parsers, app.state.watch = parsers, watcher
    app.add_middleware(BodyLimit, settings=settings)  # inside HostGuard: a bad Host first
    app.add_middleware(HostGuard, allowed_hosts=settings.allowed_hosts,
                       allowed_origins=settings.allowed_origins)
    app.add_middleware(GZipMiddleware, minimum_size=1000)
    app.add_middleware(SecurityHeaders, frame_ancestors=settings.frame_ancestors)
    # Outermost: a request past the caps costs nothing else, and every body read is timed.
    app.add_middleware(RequestLimits, settings=settings)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(HTTPException, http_error_handler)
    app.add_exception_handler(ClientDisconnect, client_gone_handler)
    app.mount("/static", StaticFiles(directory=REPO_ROOT / "static"), name="static")
    app.include_router(pages.router)
    app.include_router(api.router)
    app.include_router(roofline.router)
    app.include_router(plan.router)
    app.include_router(runs.router(settings))
    app.include_router(saved.router)
    app.include_router(saved_probes.router)
    app.include_router(indexes.router)
    app.include_router(previews.router)
    app.include_router(traffic.router)
    app.include_router(traffic.probes_api(settings))
    app.include_router(health.router)
    app.include_router(watch.router)
    app.include_router(validation.router)

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="specscope API",
            swagger_js_url=f"/static/vendor/swagger-ui-bundle-{SWAGGER_VERSION}.js",
            swagger_css_url=f"/static/vendor/swagger-ui-{SWAGGER_VERSION}.css",
            swagger_favicon_url="/static/favicon.png",
        )

    return app


app = create_app()


def run() -> None:
    from app.server import serve

    serve(app, app.state.settings)


if __name__ == "__main__":
    run()
