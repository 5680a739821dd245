"""A saved run as CSV: one row per token, safe to open in a spreadsheet."""

from __future__ import annotations

import csv
import io
from typing import Any

CSV_COLUMNS = ("cycle", "position", "kind", "token_id", "text", "step_ms", "cycle_start_ms",
               "cycle_ms", "drafter", "match_n", "match_start", "match_text")


# A cell starting with one of these is a formula to a spreadsheet (OWASP, "CSV Injection").
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(text: str) -> str:
    """``text`` as a CSV cell no spreadsheet evaluates: one that would start a formula gets a
    leading single quote (OWASP's advice); any other text is unchanged."""
    return "'" + text if text.startswith(FORMULA_START) else text


def token_rows(record: dict[str, Any]) -> str:
    """The CSV export: one row per token, with its cycle, position in the cycle and times.

    A draft token's ``step_ms`` is the draft step that proposed it; the target's token comes
    from the verification pass, so its ``step_ms`` is that pass's time. With prompt lookup
    (``drafter`` "ngram") one lookup proposes the cycle's tokens: each gets that lookup's time,
    and ``match_n``, ``match_start`` and ``match_text`` say which n-gram matched where (empty
    for the draft model and for a cycle without a match). A token's text that a spreadsheet
    would take for a formula is quoted (``spreadsheet_safe``)."""
    out = io.StringIO()
    # RFC 4180's CRLF rows: the writer then quotes any text holding a CR or an LF, so a token
    # that is a carriage return cannot end a row early.
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    start = 0.0
    for cycle in record["cycles"]:
        drafter = cycle.get("drafter", "model")  # older records: the draft model
        matched = drafter == "ngram" and cycle.get("match_n", 0) > 0
        match = ([cycle["match_n"], cycle["match_start"],
                  spreadsheet_safe(cycle.get("match_text", ""))] if matched else ["", "", ""])
        for position, token in enumerate(cycle["tokens"]):
            steps = cycle["draft_step_ms"]
            if drafter == "ngram":
                is_draft = token["kind"] != "target" and bool(steps)
                step = steps[0] if is_draft else cycle["verify_ms"]
            elif cycle.get("tree"):  # one pass of the heads drafted the whole tree
                step = cycle["draft_ms"] if token["kind"] != "target" else cycle["verify_ms"]
            else:
                is_draft = token["kind"] != "target" and position < len(steps)
                step = steps[position] if is_draft else cycle["verify_ms"]
            writer.writerow([cycle["index"], position, token["kind"], token["id"],
                             spreadsheet_safe(token["text"]),
                             f"{step:.3f}", f"{start:.3f}", f"{cycle['cycle_ms']:.3f}",
                             drafter, *match])
        start += cycle["cycle_ms"]
    return out.getvalue()
