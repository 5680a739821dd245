"""A running vLLM server watched (``specscope watch``, and the page's /watch through
app/watch): ``intervals`` (each scrape of ``/metrics`` as an interval with its state, figures
and verdict against the plan), ``store`` (their SQLite history) and ``command`` (the command
line)."""
