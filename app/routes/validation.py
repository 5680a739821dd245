"""``/validation``: the cost model held against published measurements, drawn (a page that
needs no JavaScript), and ``GET /api/validation``, the same report as JSON."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from app.errors import error_responses
from app.templating import templates
from app.validation import page_context, report
from engine.analytic import validate

router = APIRouter(tags=["validation"])
Rates = Literal["datasheet", "achieved"]
assert set(Rates.__args__) == set(validate.RATES)  # the page offers what the command line does
RATES_HELP = ("bandwidth and FLOP/s the roofline runs at: the datasheet's (default; the "
              "overheads are fitted on top of them) or the page's achieved fractions")


@router.get("/validation", response_class=HTMLResponse, include_in_schema=False)
def validation_page(request: Request) -> HTMLResponse:
    """Every fitted and held-out series beside the model's prediction. A page reads its link
    as far as it goes: an unknown parameter or rate is named in a notice, not refused."""
    notices = []
    rates = validate.DEFAULT_RATES
    for name, value in request.query_params.multi_items():
        if name != "rates":
            notices.append(f"{name[:24]!r} is not a setting of this page; it was ignored.")
        elif value in validate.RATES:
            rates = value
        else:
            notices.append(f"rates={value[:24]!r} is not one of "
                           f"{', '.join(sorted(validate.RATES))}; using {validate.DEFAULT_RATES}.")
    context = page_context(rates) | {
        "notices": notices,
        "page_title": "The cost model against published measurements · specscope"}
    return templates.TemplateResponse(request, "validation.html", context)


@router.get("/api/validation", summary="The cost model against published measurements",
            responses=error_responses(422))
def validation_api(
    rates: Annotated[Rates, Query(description=RATES_HELP)] = validate.DEFAULT_RATES,
) -> dict[str, Any]:
    """What ``specscope validate --json`` prints: the fitted ``terms`` and each engine's
    ``overheads`` built from them (every pass: ``launch_s_per_layer`` times its model's
    layers; once a step: ``step_fixed_s``; a draft pass: ``draft_fixed_s``; a speculative
    cycle: ``spec_fixed_s`` + ``spec_per_row_s`` B; a schedule's step: ``schedule_fixed_s`` +
    ``schedule_per_row_s`` B), the ``fits`` that found them and ``left_out`` (each fit source
    left out in turn), then every
    fitted and held-out series with its source, table, split, each point's setting, measured
    and model values, how the number was read and its error ``(model - measured) /
    measured``, the median absolute error, whether a held-out series misses (median above
    25 %) and, if so, the reason docs/design.md gives; the sources' citations; what the
    stored material lacked."""
    return validate.report_json(report(rates))
