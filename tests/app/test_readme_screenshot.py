"""The README's picture of the page is of the page as it is: the PNG carries the hash of the
HTML it was rendered from, and the page rendered now must give the same hash (else run
``tools/readme_screenshot.py`` again)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def tool():
    spec = importlib.util.spec_from_file_location("readme_screenshot",
                                                  REPO / "tools" / "readme_screenshot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_shows_the_page_as_it_renders_now():
    shot = tool()
    assert "docs/page.png" in (REPO / "README.md").read_text(encoding="utf-8")
    recorded = shot.text_chunks(shot.PNG.read_bytes()).get(shot.KEY)
    assert recorded, "docs/page.png carries no HTML hash: run tools/readme_screenshot.py"
    assert recorded == shot.html_hash(shot.page_html()), (
        "the page's HTML has changed since docs/page.png was taken: run "
        "PYTHONPATH=. .venv/bin/python tools/readme_screenshot.py")


def test_the_hash_chunk_round_trips_and_a_changed_page_is_seen():
    shot = tool()
    png = shot.PNG.read_bytes()
    marked = shot.with_text(png, b"other-key", "x")
    assert shot.text_chunks(marked)[b"other-key"] == "x"
    assert shot.html_hash("<p>a</p>") != shot.html_hash("<p>b</p>")
