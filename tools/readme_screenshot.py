"""The README's picture of the page: ``docs/page.png``, the top of ``/`` in headless Chromium at
1280 x 900, with the SHA-256 of the HTML it was rendered from written into the PNG (a tEXt
chunk, ``specscope-html-sha256``). ``tests/app/test_readme_screenshot.py`` renders the page
again and fails when the HTML has changed since: then run this again.

    PYTHONPATH=. .venv/bin/python tools/readme_screenshot.py

The page is served without models (``SPECSCOPE_LOAD_MODELS=false``): the top of the page, the
slider model and its figures, is the same either way.
"""

from __future__ import annotations

import hashlib
import struct
import sys
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PNG = REPO / "docs" / "page.png"
KEY = b"specscope-html-sha256"
SIGNATURE = b"\x89PNG\r\n\x1a\n"


def page_html() -> str:
    """``/`` as the server renders it, with no models loaded."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from engine.settings import Settings

    with TestClient(create_app(Settings(load_models=False)), base_url="http://127.0.0.1") as c:
        return c.get("/").text


def html_hash(html: str) -> str:
    return hashlib.sha256(html.encode("utf-8")).hexdigest()


def with_text(png: bytes, key: bytes, value: str) -> bytes:
    """``png`` with a tEXt chunk ``key=value`` after its header chunk."""
    assert png.startswith(SIGNATURE), "not a PNG"
    header_end = len(SIGNATURE) + 8 + struct.unpack(">I", png[8:12])[0] + 4
    data = key + b"\0" + value.encode("latin-1")
    chunk = struct.pack(">I", len(data)) + b"tEXt" + data + struct.pack(
        ">I", zlib.crc32(b"tEXt" + data))
    return png[:header_end] + chunk + png[header_end:]


def text_chunks(png: bytes) -> dict[bytes, str]:
    """Every tEXt chunk of ``png``, key to value."""
    chunks, at = {}, len(SIGNATURE)
    while at < len(png):
        length = struct.unpack(">I", png[at : at + 4])[0]
        kind, data = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        if kind == b"tEXt":
            key, _, value = data.partition(b"\0")
            chunks[key] = value.decode("latin-1")
        at += 12 + length
    return chunks


def main() -> int:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from browser_session import page_on_server

    digest = html_hash(page_html())
    with page_on_server("/", {"SPECSCOPE_LOAD_MODELS": "false"}) as page:
        page.set_viewport_size({"width": 1280, "height": 900})
        page.wait_for_timeout(300)
        shot = page.screenshot()
    PNG.write_bytes(with_text(shot, KEY, digest))
    print(f"wrote {PNG.relative_to(REPO)} ({len(shot) // 1024} KB), HTML sha256 {digest[:16]}...")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
