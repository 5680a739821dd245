"""The slider page's link-preview image and its chart downloads, for any state in the link."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from app.charts import speedup_chart
from app.measurements import measurement_store
from app.params import PageState, page_figures, parse_page_state
from app.plan import parse_plan_state, plan_planning
from app.preview import chart_svg, export, png_response, preview_svg
from app.roofline import batch_title, parse_roofline_state, section_context
from app.saved.cards import slider_preview_svg
from engine.analytic.theory import Figures

router = APIRouter(include_in_schema=False)


def _figures(request: Request) -> tuple[PageState, Figures]:
    # Bad values are clamped as the page clamps them: an image never fails on a link.
    state, _ = parse_page_state(list(request.query_params.multi_items()))
    return state, page_figures(state)


@router.get("/preview.png")
def slider_preview(request: Request) -> Response:
    _, fig = _figures(request)
    return png_response(request.app.state.renderer, slider_preview_svg(fig))


@router.get("/preview-batch.png")
def batch_preview(request: Request) -> Response:
    """The card of a link whose batch section is set: its title, its headline and its chart."""
    query = list(request.query_params.multi_items())
    state, _ = parse_page_state(query)
    rl_state, rl_notices = parse_roofline_state(query)
    plan_state, _ = parse_plan_state(query)
    settings = request.app.state.settings
    section = section_context(query, rl_state, rl_notices, state,
                              *measurement_store(request.app).curves(),
                              planning=plan_planning(plan_state, state.alpha, state.curve),
                              machine_costs=settings.machine_costs)
    return png_response(request.app.state.renderer, preview_svg(
        batch_title(section["rl_setting"], section["rl"], section["rl_plan"]),
        section["rl_headline"], section["rl_chart"], "_batch_chart.html", r=section["rl"],
        ch=section["rl_chart"]))


@router.get("/chart.{fmt}")
def slider_chart(request: Request, fmt: str) -> Response:
    if fmt not in ("svg", "png"):
        return JSONResponse(status_code=404, content={
            "message": "the chart downloads as chart.svg or chart.png"})
    state, fig = _figures(request)
    name = f"specscope-speedup-alpha{state.alpha:g}-k{state.k}-c{state.c:g}-v{state.v:g}"
    svg = chart_svg(speedup_chart(fig), "_chart.html", fig=fig)
    return export(request.app.state.renderer, svg, fmt, name)
