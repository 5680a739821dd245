"""Titles, link-preview cards, chart downloads and the embed view's frame policy."""

from __future__ import annotations

import html
import re
import struct
import time

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from app.charts import measured_vs_model, speedup_chart
from app.main import create_app
from app.preview import PREVIEW_HEIGHT, PREVIEW_WIDTH, png, preview_svg
from app.saved.cards import slider_preview_svg
from engine.analytic.theory import figures
from engine.settings import Settings

HOSTILE_TITLES = [
    "</text><script>alert(1)</script><text>",
    "&amp; &lt; ]]> <![CDATA[ x ]]> <!-- --> <?xml version='1.0'?>",
    "nul \x00 bell \x07 escape \x1b form feed \x0c and \ufffe",
    "lone surrogate \ud800 here",
    "שלום RTL \u202e reversed \u202c, emoji 🚀🧪, CJK 推测解码",
    "W" * 10_000,
    "line\nbreaks\r\nand\ttabs " * 50,
]


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def bars():
    return measured_vs_model(["1", "2"], [0.7, 0.5], [0.7, 0.49])


@pytest.mark.parametrize("title", HOSTILE_TITLES)
def test_a_hostile_title_still_gives_a_valid_preview_of_the_card_size(title, bars):
    svg = preview_svg(title, title, bars, "_bar_chart.html", title=title, x_label=title)
    assert "<script>" not in svg
    assert png_size(png(svg, zoom=1.0)) == (PREVIEW_WIDTH, PREVIEW_HEIGHT) == (1200, 630)


def test_the_title_is_drawn(bars):
    def card(heading: str) -> bytes:
        return png(preview_svg(heading, "x", bars, "_bar_chart.html", title="t", x_label="x"),
                   zoom=1.0)

    one, other = card("alpha 0.70"), card("alpha 0.90")
    assert one != other


def test_slider_preview_follows_the_link_and_is_cached(client):
    renderer = client.app.state.renderer
    first = client.get("/preview.png?alpha=0.8&k=5&c=0.1")
    assert first.status_code == 200 and first.headers["content-type"] == "image/png"
    assert png_size(first.content) == (1200, 630)
    assert "max-age" in first.headers["cache-control"]
    hits = renderer.hits
    again = client.get("/preview.png?alpha=0.8&k=5&c=0.1")
    assert again.content == first.content and renderer.hits == hits + 1
    assert client.get("/preview.png?alpha=0.2&k=5&c=0.1").content != first.content
    # A bad link is clamped as the page clamps it, never an error.
    assert png_size(client.get("/preview.png?alpha=banana&k=-4").content) == (1200, 630)


def test_opening_a_page_draws_its_card_ahead_so_the_first_fetch_is_a_cache_hit(client):
    renderer = client.app.state.renderer
    drawn = renderer.drawn
    client.get("/?alpha=0.43&k=3&c=0.12")  # as a chat app does on a pasted link
    assert renderer.drawn == drawn + 1  # started in the background, before anyone asked
    deadline = time.monotonic() + 30
    while renderer.drawing and time.monotonic() < deadline:
        time.sleep(0.02)
    hits = renderer.hits
    card = client.get("/preview.png?alpha=0.43&k=3&c=0.12")
    assert png_size(card.content) == (1200, 630)
    assert renderer.drawn == drawn + 1 and renderer.hits == hits + 1  # the fetch drew nothing


def test_a_fetch_during_the_drawing_waits_for_it_instead_of_drawing_again(client):
    renderer = client.app.state.renderer
    svg = slider_preview_svg(figures(0.57, 6, 0.2))
    drawn = renderer.drawn
    future = renderer.draw_soon(svg)
    assert future is not None
    card = renderer.png(svg)  # at once: the drawing is most likely still under way
    assert card == future.result() and renderer.drawn == drawn + 1


def test_slider_page_has_a_title_and_card_tags_for_its_state(client):
    html = client.get("/?alpha=0.7&k=4&c=0.18").text
    assert "<title>alpha 0.70, k 4: 1.61x, best k 3 · specscope</title>" in html
    assert '<meta property="og:title" content="alpha 0.70, k 4: 1.61x, best k 3">' in html
    assert ('<meta property="og:image" content="http://127.0.0.1/preview.png?alpha=0.7&amp;'
            'k=4&amp;c=0.18&amp;v=1&amp;step_ms=22&amp;tokens=500&amp;seed=0">') in html
    assert '<meta name="twitter:card" content="summary_large_image">' in html
    nothing_pays = client.get("/?alpha=0.05&c=0.5").text
    assert "<title>alpha 0.05, k 4: 0.35x, do not speculate · specscope</title>" in nothing_pays


def test_at_the_sliders_edge_the_title_and_the_card_say_or_more_as_the_page_does(client):
    fig = figures(0.99, 4, 0.01)
    assert fig.best_k == 16 and fig.best_at_edge  # the last k the slider has
    page = client.get("/?alpha=0.99&k=4&c=0.01").text
    assert "<strong>k = 16 or more</strong>" in page
    assert "best k 16 or more · specscope</title>" in page
    assert "Best k = 16 or more, worth 13.54×." in page  # the card's description
    assert "Best k = 16 or more, worth 13.54×." in slider_preview_svg(fig)


def test_chart_downloads_as_svg_and_png(client):
    svg = client.get("/chart.svg?alpha=0.7&k=4")
    assert svg.headers["content-type"].startswith("image/svg+xml")
    assert 'filename="specscope-speedup-alpha0.7-k4-c0.18-v1.svg"' in \
        svg.headers["content-disposition"]
    chart = speedup_chart(figures(0.7, 4, 0.18))
    assert svg.text.startswith('<svg xmlns="http://www.w3.org/2000/svg"')
    assert f'width="{chart.width}" height="{chart.height}"' in svg.text
    assert "best k = 3" in svg.text and "<style>" in svg.text
    image = client.get("/chart.png?alpha=0.7&k=4")
    assert png_size(image.content) == (2 * chart.width, 2 * chart.height)
    assert client.get("/chart.gif").status_code == 404


def test_the_page_offers_the_downloads_for_its_state(client):
    html = client.get("/?alpha=0.6&k=7").text
    query = "alpha=0.6&amp;k=7&amp;c=0.18&amp;v=1&amp;step_ms=22&amp;tokens=500&amp;seed=0"
    assert f'href="/chart.svg?{query}"' in html and f'href="/chart.png?{query}"' in html


def test_embed_view_is_results_only_and_framing_is_denied_by_default(client):
    response = client.get("/?embed=1&alpha=0.6")
    assert response.status_code == 200
    html = response.text
    assert 'class="headline"' in html and 'class="chart"' in html
    assert 'id="controls"' not in html and 'id="live"' not in html
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-frame-options"] == "DENY"


def test_embed_view_may_be_framed_only_by_listed_origins():
    settings = Settings(load_models=False, frame_ancestors=["https://docs.example.com",
                                                            "http://localhost:8080"])
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        embed = client.get("/?embed=1")
        policy = embed.headers["content-security-policy"]
        assert "frame-ancestors https://docs.example.com http://localhost:8080" in policy
        assert "x-frame-options" not in embed.headers
        assert "script-src 'self';" in policy  # the rest of the policy is unchanged
        page = client.get("/")  # the full page, with its controls, is never framed
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert page.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize("origin", ["https://x.example; script-src *", "*", "'self'",
                                    "https://x.example/path", "javascript:alert(1)"])
def test_frame_ancestors_takes_origins_only(origin):
    with pytest.raises(ValidationError, match="is not an origin"):
        Settings(load_models=False, frame_ancestors=[origin])


def _meta(html_text: str, prop: str) -> str:
    return html.unescape(re.search(rf'<meta property="{prop}" content="([^"]*)"',
                                   html_text).group(1))


def test_a_link_whose_batch_section_is_set_previews_that_section(client):
    """A pasted link to the 70B plan unfurls as the 70B plan: the hardware, the models, the k
    and where speculation pays, the section's own headline, and its chart as the image; a
    link without section inputs keeps the slider's card."""
    page = client.get("/?models=llama-70b-1b&gpus=8&context=8192&batch=64").text
    title = _meta(page, "og:title")
    assert title.startswith("Llama 3.1 70B / Llama 3.2 1B on 8 × H100 SXM, batch 64: ")
    k = re.search(r'data-figure="rl_k"[^>]*>k = (\d+)', page)
    assert k and f"with k = {k.group(1)}" in title and "speculation pays" in title
    headline = re.search(r'data-figure="roofline-headline"[^>]*>(.*?)</', page, re.S).group(1)
    assert _meta(page, "og:description") == html.unescape(" ".join(headline.split()))
    image = _meta(page, "og:image")
    assert image.startswith("http://127.0.0.1/preview-batch.png?")
    assert "models=llama-70b-1b" in image
    card = client.get(image.removeprefix("http://127.0.0.1"))
    assert card.status_code == 200 and png_size(card.content) == (PREVIEW_WIDTH, PREVIEW_HEIGHT)
    plain = client.get("/?alpha=0.8").text
    assert _meta(plain, "og:image").startswith("http://127.0.0.1/preview.png?")
    assert _meta(plain, "og:title").startswith("alpha 0.80")
