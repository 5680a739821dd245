"""The page: the whole page on a plain GET, one region of it (the results, the batch section)
for the page's own requests."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.charts import speedup_chart, tree_chart
from app.live import PRESETS, offered_drafters, parse_live_state, run_controls
from app.measurements import measurement_store
from app.params import (
    LOOKUP_SLIDERS,
    PRESET_C,
    SHAPE_SLIDERS,
    SLIDERS,
    PageState,
    page_figures,
    parse_page_state,
    tree_figures,
)
from app.plan import parse_plan_state, plan_context, plan_planning
from app.preview import draw_soon
from app.roofline import batch_title, default_section, parse_roofline_state, section_context
from app.routes.saved_probes import PROBES
from app.saved.cards import slider_preview_svg
from app.saved.loading import NotSaved, StoreUnavailable, saved_record
from app.saved.titles import slider_headline, slider_title
from app.templating import templates
from app.traffic.state import parse_traffic_state, traffic_context
from engine.analytic import lookup, positions, trees
from engine.analytic.drafters import DRAFTER_WORDS
from engine.analytic.positions import SHAPES
from engine.analytic.theory import accepted_sd, simulate_cycles
from engine.settings import Settings

router = APIRouter()
DEFAULT_PLAN = parse_plan_state([])[0]

SIMULATED_CYCLES = 12
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


def _simulated(state: PageState) -> list[list[str]]:
    if state.curve is not None:
        return positions.simulate_cycles(state.curve, state.k, SIMULATED_CYCLES, state.seed)
    if state.drafter == "ngram":
        return lookup.simulate_cycles(state.alpha, state.k, state.pi, SIMULATED_CYCLES,
                                      state.seed)
    return simulate_cycles(state.alpha, state.k, SIMULATED_CYCLES, state.seed)


def _strip_sd(state: PageState) -> float:
    if state.curve is not None:
        return positions.accepted_sd(state.curve, state.k)
    if state.drafter == "ngram":
        return lookup.accepted_sd(state.alpha, state.k, state.pi)
    return accepted_sd(state.alpha, state.k)


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
    fig = page_figures(state)
    context = {
        "state": state,
        "notices": notices,
        "fig": fig,
        "chart": speedup_chart(fig),
        "tree_fig": (tree_fig := tree_figures(state)),
        "tree_chart": tree_chart(tree_fig.paths, tree_fig.survival) if tree_fig else None,
        "cycles": _simulated(state),
        # How far the strip's own average may fall from the expected one by chance.
        "strip_spread": _strip_sd(state) / SIMULATED_CYCLES**0.5,
        "sliders": SLIDERS,
        "lookup_sliders": LOOKUP_SLIDERS,
        "shape_sliders": SHAPE_SLIDERS,
        "shapes": SHAPES,
        "slider_drafters": DRAFTER_WORDS,
        "preset_c": PRESET_C,
        "page_title": f"{slider_title(fig)} · specscope",
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
        # A page opened from a pasted link is followed by a fetch of its card: draw it now.
        draw_soon(slider_preview_svg(fig))
        load_error = getattr(request.app.state, "load_error", None)
        context |= {
            "live": live,
            "live_drafters": offered_drafters(settings),
            "medusa_tree": trees.text(trees.MEDUSA_TREE),
            "run_controls": run_controls(settings),
            "presets": PRESETS,
            "pairs": settings.pairs,
            "max_prompt_chars": settings.max_prompt_chars,
            "live_available": getattr(request.app.state, "runs", None) is not None,
            "live_unavailable_reason": load_error or "models are not loaded (SPECSCOPE_LOAD_MODELS"
                                                    " is off)",
            "meta": _meta(request, context, fig, state, rl_state, plan_state),
        }
    response = templates.TemplateResponse(request, template, context, headers=headers)
    response.headers["Vary"] = "HX-Request, HX-Target"
    # What the page's own timing sees of the server (benchmarks/page_latency.py prints it).
    response.headers["Server-Timing"] = f"page;dur={(time.perf_counter() - started) * 1000:.2f}"
    return response
