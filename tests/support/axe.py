"""An accessibility audit in real Chromium: axe-core (vendored, pinned by its file name) run
on a page for WCAG 2.1 A and AA and axe's best practices."""

from __future__ import annotations

import re

from playwright.sync_api import Browser, Page

from engine.settings import REPO_ROOT

AXE = "/static/vendor/axe-core-4.14.1.min.js"
assert (REPO_ROOT / AXE.lstrip("/")).is_file(), AXE
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
RUN = """async tags => {
  const result = await axe.run(document, {runOnly: {type: "tag", values: tags}});
  return result.violations.map(v => v.id + ": " + v.help + " at "
    + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(", "));
}"""


def audit(page: Page) -> list[str]:
    """The page's violations as it stands now (one line each: the rule, what it asks and
    where), from the page's own origin so its Content-Security-Policy allows the script."""
    origin = re.match(r"https?://[^/]+", page.url).group(0)
    page.add_script_tag(url=origin + AXE)
    return page.evaluate(RUN, TAGS)


def audit_as_without_javascript(browser: Browser, url: str, html: str,
                                color_scheme: str = "light") -> list[str]:
    """Audit the page a browser with JavaScript off showed (``html``: its DOM, as
    ``page.content()`` gave it at ``url``). axe needs JavaScript, so the same DOM is served
    again to a page that runs scripts, with the page's own scripts left out and its
    ``<noscript>`` content shown as the browser without JavaScript showed it."""
    html = re.sub(r"<script\b[^>]*>.*?</script>", "", html, flags=re.S)
    html = html.replace("<noscript>", "<div>").replace("</noscript>", "</div>")
    context = browser.new_context(color_scheme=color_scheme)
    try:
        page = context.new_page()
        page.route(url, lambda route: route.fulfill(
            status=200, content_type="text/html; charset=utf-8", body=html))
        page.goto(url)
        return audit(page)
    finally:
        context.close()
