"""The FastAPI application: settings, lifespan, routers, static files."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from app.errors import validation_error_handler
from app.routes import api, pages
from app.security import SecurityHeaders
from app.settings import REPO_ROOT, Settings

SWAGGER_VERSION = "5.35.0"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield

    app = FastAPI(title="specscope", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.settings = settings
    app.add_middleware(GZipMiddleware, minimum_size=1000)
    app.add_middleware(SecurityHeaders)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.mount("/static", StaticFiles(directory=REPO_ROOT / "static"), name="static")
    app.include_router(pages.router)
    app.include_router(api.router)

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="specscope API",
            swagger_js_url=f"/static/vendor/swagger-ui-bundle-{SWAGGER_VERSION}.js",
            swagger_css_url=f"/static/vendor/swagger-ui-{SWAGGER_VERSION}.css",
            swagger_favicon_url="/static/favicon.svg",
        )

    return app


def run() -> None:
    import uvicorn

    settings = Settings()
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port)


if __name__ == "__main__":
    run()
