"""Published measurements the cost model is held against, read from
``measurements/published/*.json`` (standard library only).

Each file is one source (a README table, a paper's table, an issue comment) with its full
citation: ``source`` (title, url, version, where in it, a quote), the hardware and software,
and ``series`` of points. Every point says how its number was read (``reading``: "exact
(table)", "exact (text)", "read from a figure", or :data:`QUOTED` when the number comes from
another text quoting the source, which then says where in ``quoted_by``; this project's own
sweeps, :mod:`engine.analytic.own_sweeps`, read :data:`MEASURED_HERE`). Each series' role in
the validation is in one file, ``split.json`` (:data:`SPLIT_FILE`), written before the fit and
not chosen after seeing the errors; every series loaded must have one, and every one there
must be loaded:

- ``fit``: the overhead terms are fitted on these points
- ``held_out``: compared with the model, never fitted
- ``schedule_fit``: fixes what a per-batch schedule adds to a step (vLLM's k = 0 report)
- ``kernel_fit``: fixes the share of bf16's bandwidth weight-only int8 and int4 kernels reach
  (torchao's runs of gpt-fast's kernels)
- ``input``: a measured quantity the model takes (an acceptance rate), not compared
- ``reference``: recorded, not modelled (a tree draft, an unknown acceptance rate)

What a source should have held but the stored copy did not is listed under ``not_found``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

FOLDER = Path(__file__).resolve().parents[2] / "measurements" / "published"
SCHEMA = "specscope.published/1"
SPLIT_FILE = FOLDER / "split.json"
SPLIT_SCHEMA = "specscope.split/1"
SPLITS = ("fit", "held_out", "schedule_fit", "kernel_fit", "input", "reference")
QUANTITIES = {
    "tokens_per_s_per_sequence": "tokens/s",
    "tpot_ms": "ms",
    "speedup": "x",
    "acceptance_rate": "1",
}
QUOTED = "quoted (from the table by another text; not read from the source here)"
MEASURED_HERE = "measured by this project (a shipped sweep file)"
READINGS = ("exact (table)", "exact (text)", "read from a figure", QUOTED, MEASURED_HERE)
SOURCE_FIELDS = ("title", "url", "version", "where", "quote")


class PublishedError(ValueError):
    """A published-measurement file that does not follow the schema; the message names it."""


@dataclass(frozen=True)
class Point:
    """One measured number and the setting it was measured at (``extra``: the point's other
    fields, e.g. ``model``, ``gpus``, ``dtype``, ``k``, ``arm``)."""

    value: float
    reading: str
    batch: int | None = None
    context: int | None = None
    extra: dict = field(default_factory=dict)

    def get(self, name: str, default=None):
        """A field of the point, else ``default`` (the series' value, usually)."""
        if name in ("batch", "context"):
            own = getattr(self, name)
            return default if own is None else own
        return self.extra.get(name, default)


@dataclass(frozen=True)
class Series:
    id: str
    label: str
    quantity: str
    unit: str
    split: str
    points: tuple[Point, ...]
    fields: dict  # the series' other fields (hardware, model, gpus, dtype, notes, ...)
    source_id: str

    def setting(self, point: Point, name: str, default=None):
        """``name`` for ``point``: the point's own value, else the series', else ``default``."""
        return point.get(name, self.fields.get(name, default))


@dataclass(frozen=True)
class Source:
    id: str
    title: str
    url: str
    version: str
    where: str
    quote: str
    hardware: str
    software: str
    notes: str
    series: tuple[Series, ...]
    not_found: tuple[dict, ...]
    path: Path


def _require(mapping: dict, names, where: str) -> None:
    for name in names:
        value = mapping.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise PublishedError(f"{where}: '{name}' is missing or empty")


def _point(raw: dict, where: str) -> Point:
    _require(raw, ("value", "reading"), where)
    value = raw["value"]
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise PublishedError(f"{where}: 'value' must be a positive number, got {value!r}")
    if raw["reading"] not in READINGS:
        raise PublishedError(f"{where}: 'reading' must be one of {READINGS}, "
                             f"got {raw['reading']!r}")
    if raw["reading"] == QUOTED and not str(raw.get("quoted_by", "")).strip():
        raise PublishedError(f"{where}: a quoted number says where it was quoted ('quoted_by')")
    for name in ("batch", "context", "gpus", "k"):
        if name in raw and (not isinstance(raw[name], int) or raw[name] < 0
                            or (name != "k" and raw[name] == 0)):
            raise PublishedError(f"{where}: '{name}' must be a positive whole number")
    extra = {k: v for k, v in raw.items() if k not in ("value", "reading", "batch", "context")}
    return Point(float(value), raw["reading"], raw.get("batch"), raw.get("context"), extra)


def _read(path: Path, schema: str) -> dict:
    """A data file's JSON, of ``schema`` (a :class:`PublishedError` says what is wrong)."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise PublishedError(f"{path.name}: not readable JSON ({error})") from error
    if not isinstance(raw, dict) or raw.get("schema") != schema:
        raise PublishedError(f"{path.name}: 'schema' must be {schema!r}")
    return raw


def load_split(path: Path = SPLIT_FILE) -> dict[str, dict[str, str]]:
    """``{source id: {series id: role}}`` from the split file, each role checked."""
    raw = _read(path, SPLIT_SCHEMA)
    for source, roles in raw["sources"].items():
        for series, role in roles.items():
            if role not in SPLITS:
                raise PublishedError(f"{path.name}: {source}/{series}: the role must be one "
                                     f"of {SPLITS}, got {role!r}")
    return raw["sources"]


def role_of(split: dict[str, dict[str, str]], source_id: str, series_id: str) -> str:
    """The series' role in the split (a :class:`PublishedError` when it has none)."""
    role = split.get(source_id, {}).get(series_id)
    if role is None:
        raise PublishedError(f"{SPLIT_FILE.name}: no role for {source_id}/{series_id}: give "
                             "it one before anything is fitted or compared")
    return role


def _series(raw: dict, source_id: str, where: str, split: dict[str, dict[str, str]]) -> Series:
    _require(raw, ("id", "label", "quantity", "unit", "points"), where)
    where = f"{where} '{raw['id']}'"
    if "split" in raw:
        raise PublishedError(f"{where}: the role is given in {SPLIT_FILE.name}, not here")
    if raw["quantity"] not in QUANTITIES:
        raise PublishedError(f"{where}: unknown quantity {raw['quantity']!r}")
    if raw["unit"] != QUANTITIES[raw["quantity"]]:
        raise PublishedError(f"{where}: a {raw['quantity']} is in "
                             f"{QUANTITIES[raw['quantity']]!r}, not {raw['unit']!r}")
    if not raw["points"]:
        raise PublishedError(f"{where}: no points")
    points = tuple(_point(p, f"{where} point {i}") for i, p in enumerate(raw["points"]))
    rest = {k: v for k, v in raw.items()
            if k not in ("id", "label", "quantity", "unit", "points")}
    return Series(raw["id"], raw["label"], raw["quantity"], raw["unit"],
                  role_of(split, source_id, raw["id"]), points, rest, source_id)


def load_source(path: Path, split: dict[str, dict[str, str]] | None = None) -> Source:
    """One file, checked against the schema (a :class:`PublishedError` names what is wrong)."""
    where = path.name
    raw = _read(path, SCHEMA)
    _require(raw, ("id", "source", "hardware", "software", "series"), where)
    _require(raw["source"], SOURCE_FIELDS, f"{where} source")
    not_found = tuple(raw.get("not_found", ()))
    for i, missing in enumerate(not_found):
        _require(missing, ("what", "searched", "consequence"), f"{where} not_found {i}")
    split = load_split() if split is None else split
    series = tuple(_series(s, raw["id"], f"{where} series", split) for s in raw["series"])
    s = raw["source"]
    return Source(raw["id"], s["title"], s["url"], s["version"], s["where"], s["quote"],
                  raw["hardware"], raw["software"], raw.get("notes", ""), series, not_found,
                  path)


def load_all(folder: Path = FOLDER) -> list[Source]:
    """Every source in ``folder``, sorted by file name; series ids are unique across them."""
    split = load_split(folder / SPLIT_FILE.name)
    sources = [load_source(path, split) for path in sorted(folder.glob("*.json"))
               if path.name != SPLIT_FILE.name]
    seen: dict[str, str] = {}
    for source in sources:
        for s in source.series:
            if s.id in seen:
                raise PublishedError(f"series id {s.id!r} is in both {seen[s.id]} and "
                                     f"{source.path.name}")
            seen[s.id] = source.path.name
    return sources


def all_series(sources: list[Source]) -> dict[str, Series]:
    return {s.id: s for source in sources for s in source.series}
