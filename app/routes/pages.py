"""The page: the whole page on a plain GET, one region of it (the results, the batch section)
for the page's own requests."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.live import live_context, parse_live_state
from app.measurements import measurement_store
from app.params import PageState, parse_page_state, slider_context
from app.plan import parse_plan_state, plan_context, plan_planning
from app.roofline import batch_title, default_section, parse_roofline_state, section_context
from app.routes.saved_probes import PROBES
from app.saved.cards import slider_preview_svg
from app.saved.loading import NotSaved, StoreUnavailable, saved_record
from app.saved.titles import slider_headline, slider_title
from app.templating import templates
from app.traffic.state import parse_traffic_state, traffic_context
from engine.settings import Settings

router = APIRouter()
DEFAULT_PLAN = parse_plan_state([])[0]

# htmx asks for one region only, so a slider drag re-renders neither the controls nor the
# batch-size section: that section follows alpha and k with its own request, once they rest.
FRAGMENTS = {"results": "_results.html", "roofline": "_roofline.html"}


def _alpha_probe(request: Request, plan_state) -> tuple[dict | None, list[str]]:
    """The saved probe the link's ``alpha_from`` names, or a notice why it cannot be read."""
    if plan_state.probe is None:
        return None, []
    probe_id, _ = plan_state.probe
    try:
        return saved_record(request, probe_id, PROBES), []
    except (NotSaved, StoreUnavailable) as error:
        why = "it is not saved here" if isinstance(error, NotSaved) else str(error)
        return None, [f"alpha_from names probe {probe_id}, which cannot be read ({why}): the "
                      "alpha is taken as given by hand."]


def _meta(request: Request, context: dict, fig, state: PageState, rl_state, plan_state) -> dict:
    """The link's preview: the batch section's (the hardware, the models, where speculation
    pays and k, its chart) when the link sets the section's inputs, else the slider's."""
    url = f"{request.url_for('slider_page')}?{context['canonical_query']}"
    if default_section(rl_state) and plan_state == DEFAULT_PLAN:
        return {"title": slider_title(fig), "description": slider_headline(fig), "url": url,
                "image": f"{request.url_for('slider_preview')}?{state.query()}"}
    return {"title": batch_title(context["rl_setting"], context["rl"], context["rl_plan"]),
            "description": context["rl_headline"], "url": url,
            "image": f"{request.url_for('batch_preview')}?{context['canonical_query']}"}


@router.api_route("/", methods=["GET", "HEAD"], response_class=HTMLResponse,
                  include_in_schema=False)
def slider_page(request: Request) -> HTMLResponse:
    started = time.perf_counter()
    settings: Settings = request.app.state.settings
    query = list(request.query_params.multi_items())
    fragment = FRAGMENTS.get(request.headers.get("HX-Target", ""))
    state, notices = parse_page_state(query)
    live, live_notices = parse_live_state(query, settings)
    traffic, traffic_notices = parse_traffic_state(query, settings)
    rl_state, rl_notices = parse_roofline_state(query)
    plan_state, plan_notices = parse_plan_state(query)
    context = slider_context(state, notices)
    fig = context["fig"]
    if not fragment and request.query_params.get("embed") != "1":
        # A page opened from a pasted link is followed by a fetch of its card: draw it now,
        # in a worker, while this process builds the page.
        request.app.state.renderer.draw_soon(slider_preview_svg(fig))
    context |= {
        "rl_state": rl_state,
        # The address bar is rewritten to this, so a shared link carries the clamped values.
        "canonical_query": "&".join(
            (state.query(), live.query(), rl_state.query(), plan_state.query(),
             traffic.query())),
    }
    # A slider drag asks for the results alone: the batch-size section is not computed for it.
    if fragment != "_results.html":
        context |= section_context(query, rl_state, rl_notices, state,
                                   *measurement_store(request.app).curves(),
                                   planning=plan_planning(plan_state, state.alpha, state.curve),
                                   machine_costs=settings.machine_costs)
        probe, probe_notices = _alpha_probe(request, plan_state)
        context |= plan_context(plan_state, plan_notices + probe_notices,
                                context["rl_setting"], state.alpha, rl_state, probe,
                                state.curve)
    if fragment:
        template = fragment
        # The results carry their link as data-canonical, applied once the sliders rest.
        headers = ({} if fragment == "_results.html"
                   else {"HX-Replace-Url": f"/?{context['canonical_query']}"})
    elif request.query_params.get("embed") == "1":
        template = "embed.html"
        headers = {}
        context["page_url"] = f"{request.url_for('slider_page')}?{context['canonical_query']}"
    else:
        template = "index.html"
        headers = {}
        notices += live_notices
        notices += traffic_notices
        context |= traffic_context(traffic, settings)
        context |= live_context(live, settings,
                                getattr(request.app.state, "runs", None) is not None,
                                getattr(request.app.state, "load_error", None))
        context["meta"] = _meta(request, context, fig, state, rl_state, plan_state)
    response = templates.TemplateResponse(request, template, context, headers=headers)
    response.headers["Vary"] = "HX-Request, HX-Target"
    # What the page's own timing sees of the server (benchmarks/page_latency.py prints it).
    response.headers["Server-Timing"] = f"page;dur={(time.perf_counter() - started) * 1000:.2f}"
    return response
