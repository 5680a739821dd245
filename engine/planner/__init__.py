"""The plan behind the page, ``GET /api/plan`` and ``specscope plan``: the batch-size schedule
itself (:mod:`engine.planner.schedule`), its inputs, its costs, the vLLM deployment that
carries it, the report with its verdict and advice, and the command's work
(:mod:`engine.planner.command`). Standard library only, on top of :mod:`engine.analytic`."""
