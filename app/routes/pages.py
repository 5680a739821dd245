"""The slider page: the full page on a plain GET, the results fragment for htmx."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.charts import speedup_chart
from app.params import SLIDERS, parse_page_state
from app.templating import templates
from engine.theory import figures, simulate_cycles

router = APIRouter()

SIMULATED_CYCLES = 12


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def slider_page(request: Request) -> HTMLResponse:
    state, notices = parse_page_state(list(request.query_params.multi_items()))
    fig = figures(state.alpha, state.k, state.c, state.v, state.step_ms, state.tokens)
    context = {
        "state": state,
        "notices": notices,
        "fig": fig,
        "chart": speedup_chart(fig),
        "cycles": simulate_cycles(state.alpha, state.k, SIMULATED_CYCLES, state.seed),
        "sliders": SLIDERS,
    }
    # htmx asks for the results only, so a slider drag never re-renders the controls.
    partial = request.headers.get("HX-Target") == "results"
    template = "_results.html" if partial else "index.html"
    response = templates.TemplateResponse(request, template, context)
    response.headers["Vary"] = "HX-Request, HX-Target"
    return response
