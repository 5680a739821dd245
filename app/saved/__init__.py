"""Saved runs and probes: the archiver that keeps a finished one (``archive``), the machine
it ran on (``machine``), and the views of a record: titles (``titles``), preview cards
(``cards``), the replay's frames (``replay``) and the CSV export (``csv_export``)."""
