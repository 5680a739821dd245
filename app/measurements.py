"""The measured curves the roofline chart overlays, read from ``SPECSCOPE_MEASUREMENTS_DIR``.

Files are read again only when the folder's listing, sizes or times change, so a new sweep
dropped into the folder shows up on the next page load without a restart."""

from __future__ import annotations

import threading
from pathlib import Path

from engine.measure.curves import MeasuredCurve, load_curves


class MeasurementStore:
    def __init__(self, folder: Path):
        self.folder = folder
        self._lock = threading.Lock()
        self._signature: tuple | None = None
        self._loaded: tuple[list[MeasuredCurve], list[str]] = ([], [])

    def _listing(self) -> tuple:
        try:
            return tuple(sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size)
                                for p in self.folder.glob("*.json")))
        except OSError:
            return ()

    def curves(self) -> tuple[list[MeasuredCurve], list[str]]:
        """The curves that loaded, and one line per file that was skipped."""
        signature = self._listing()
        with self._lock:
            if signature != self._signature:
                self._loaded = load_curves(self.folder)
                self._signature = signature
            return self._loaded


def measurement_store(app) -> MeasurementStore:
    """The app's store, made on first use from its settings."""
    store = getattr(app.state, "measurements", None)
    if store is None:
        store = app.state.measurements = MeasurementStore(app.state.settings.measurements_dir)
    return store
