"""history-thresholds.json: each class's run-to-run spread (time and energy per call), where
it was measured or whose figure it borrows, and the history threshold it gives."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kperf.config import ConfigError, load_json
from kperf.gate.config import KernelClass

MEASURES = ("time", "energy")


@dataclass(frozen=True)
class Spread:
    value: float | None  # median |ratio - 1| between two runs of one commit; None: unmeasured
    source: str  # where it was measured, or whose figure it borrows and why
    # the ``tail_quantile`` quantile of an unchanged case's |ratio - 1| in those runs (the
    # file's ``tail``; its ``largest``, the quantile 1, where it has no ``tail``)
    tail: float | None = None


@dataclass(frozen=True)
class History:
    path: Path
    factor: float
    step: float
    spreads: dict[tuple[str, str], Spread]  # (class, measure) -> its spread
    tail_factor: float = 0.0  # the threshold is at least this times a spread's ``tail``
    # a series of two levels (``two_level``) -> its own largest |move| (both ways)
    two_level: dict[str, float] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> History:
        return cls.from_raw(path, load_json(path, "history-thresholds"))

    @staticmethod
    def load_raw(path: Path) -> dict[str, Any]:
        return load_json(path, "history-thresholds")

    @classmethod
    def from_raw(cls, path: Path, raw: dict[str, Any]) -> History:
        two = {s: float(e["largest"]) for s, e in raw.get("two_level", {}).items()
               if "largest" in e}
        return cls(path, float(raw["factor"]), float(raw["step"]),
                   _resolve(path, raw["classes"]), float(raw.get("tail_factor", 0.0)), two)

    def series_threshold(self, series: str, klass: KernelClass, measure: str) -> float:
        """A series' threshold: its class's, or for a series of two levels ``tail_factor``
        x its own largest move where that is more (rounded up to ``step``)."""
        own = self.two_level.get(series)
        base = self.threshold(klass, measure)
        if own is None or klass.exact:
            return base
        return max(base, round(math.ceil(round(self.tail_factor * own / self.step, 9))
                               * self.step, 9))

    def threshold(self, klass: KernelClass, measure: str) -> float:
        """``factor`` x spread, or ``tail_factor`` x its tail where that is given and
        more, rounded up to ``step``, never below the class's min_ratio; exact classes 0,
        classes without a spread their min_ratio."""
        if klass.exact:
            return 0.0
        spread = self.spreads.get((klass.name, measure))
        if spread is None or spread.value is None:
            return klass.min_ratio
        bound = max(self.factor * spread.value, self.tail_factor * (spread.tail or 0.0))
        steps = math.ceil(round(bound / self.step, 9))
        return max(klass.min_ratio, round(steps * self.step, 9))


def _resolve(path: Path, classes: dict[str, Any]) -> dict[tuple[str, str], Spread]:
    """Every (class, measure) with its own figure, following ``same_as`` references."""
    out: dict[tuple[str, str], Spread] = {}
    for name in classes:
        for measure in MEASURES:
            out[(name, measure)] = _follow(path, classes, name, measure, [])
    return out


def _follow(path: Path, classes: dict[str, Any], name: str, measure: str,
            seen: list[str]) -> Spread:
    key = f"{name}.{measure}"
    pointer = f"/classes/{name}/{measure}/same_as"
    if key in seen:
        raise ConfigError(path, f"same_as goes round in a circle: {' -> '.join([*seen, key])}",
                          pointer)
    entry = classes[name][measure]
    if "same_as" not in entry:
        return Spread(entry["spread"], entry["source"], entry.get("tail", entry.get("largest")))
    other, other_measure = entry["same_as"].split(".")
    if other not in classes:
        raise ConfigError(path, f"same_as {entry['same_as']!r} names no class of this file "
                                f"({', '.join(sorted(classes))})", pointer)
    found = _follow(path, classes, other, other_measure, [*seen, key])
    return Spread(found.value, f"as {entry['same_as']} ({entry['why']})", found.tail)
