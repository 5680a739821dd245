"""A Chromium page that fails its test when the page logs an error or breaks its
Content-Security-Policy."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from playwright.sync_api import Browser, Page

# A 4xx answer is the server explaining bad input, which the page shows; not a page error.
EXPLAINED_4XX = re.compile(r"Failed to load resource: .* status of 4\d\d")


# Chromium logs most violations as console errors; the event also names the directive and
# catches those it does not log (a report-only policy, a violation inside a swap).
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", function (e) {
  console.error("CSP violation: " + e.violatedDirective + " at " + e.sourceFile + ":" +
                e.lineNumber + " " + e.sample);
});
"""


def page_errors(page: Page, allow_4xx: bool = False) -> list[str]:
    """The page's uncaught exceptions, console errors and CSP violations, collected as they
    come."""
    errors: list[str] = []
    page.add_init_script(REPORT_VIOLATIONS)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: m.type == "error"
            and not (allow_4xx and EXPLAINED_4XX.search(m.text)) and errors.append(m.text))
    return errors


@contextmanager
def checked_page(browser: Browser, base_url: str, *, allow_4xx: bool = False,
                 clipboard: bool = False, **context_options) -> Iterator[Page]:
    """A page in a fresh context at ``base_url`` (with Playwright's ``context_options``: a
    viewport, a colour scheme); on leaving, no error may have been logged."""
    context = browser.new_context(base_url=base_url, **context_options)
    if clipboard:
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url)
    page = context.new_page()
    errors = page_errors(page, allow_4xx)
    yield page
    context.close()
    assert errors == [], f"the page logged errors: {errors}"
