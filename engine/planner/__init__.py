"""The plan behind the page, ``GET /api/plan`` and ``specscope plan``: its inputs, its costs,
the vLLM deployment that carries it, and the report with its verdict and advice. Standard
library only, on top of :mod:`engine.analytic` (the schedule itself is
:func:`engine.analytic.schedule.plan`)."""
