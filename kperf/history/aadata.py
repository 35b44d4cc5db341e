"""history-thresholds.json's figures computed from the A/A data kept in the repository
(tests/data/h200-history-*.json: pairs of runs of one series at two commits whose kernel did
not change), per class and measure, in both directions.

A pair's move is ``second / first - 1``; asv flags a rise past the threshold, and the order
of an A/A's two runs is chance, so a fall counts as the rise it is swapped:
``first / second - 1``. Per class and measure: ``spread``, the median of the pairs' moves
both ways (larger of the two); ``tail``, their ``tail_quantile`` quantile (0.95: one odd
pair of 50 does not set a class's threshold, issue 51); ``largest``, the largest of them;
``rise`` and ``fall``, the largest move each way as measured. Classes whose level follows
where their buffers lie (thresholds.json ``level_by_placement``) take only files whose
runs placed them (``"placed": true``), as the history places them now; the others take
every file. A series named in ``two_level`` (its levels in the data: two, each steady) is
set apart: its class's figures leave it out, and it gets its own ``largest``.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kperf.config import ConfigError
from kperf.gate.config import Thresholds
from kperf.site.series import series_class
from kperf.site.spreads import History

DIGITS = 5  # a figure's decimals as written (0.01%: 0.0001)


@dataclass(frozen=True)
class Pair:
    file: str  # the data file, relative to the repository
    set: str  # its runs (the file's list, or the pair's "pair")
    machine: str
    series: str
    first: float
    second: float

    @property
    def move(self) -> float:
        return self.second / self.first - 1.0

    @property
    def both_ways(self) -> float:
        """The rise asv would see with the runs in the worse order."""
        return max(self.second / self.first, self.first / self.second) - 1.0


def load_pairs(repo: Path, files: Sequence[str]) -> list[tuple[Pair, bool]]:
    """Every pair of unchanged code in ``files`` with whether its file's runs were placed."""
    out = []
    for name in files:
        path = repo / name
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise ConfigError(path, f"cannot read the A/A data: {err}") from err
        if not isinstance(raw.get("placed"), bool) or not isinstance(raw.get("machines"), dict):
            raise ConfigError(path, "an A/A data file says whether its runs were placed "
                                    "(\"placed\": true/false) and each set's machine "
                                    "(\"machines\")")
        for key, pairs in raw.items():
            if not isinstance(pairs, list):
                continue
            for i, p in enumerate(pairs):
                if isinstance(p, dict) and p.get("code_changed", False):
                    continue
                which = _checked_pair(path, p, f"/{key}/{i}").get("pair", key)
                if which not in raw["machines"]:
                    raise ConfigError(path, f"no machine for the set {which!r}",
                                      f"/machines/{which}")
                out.append((Pair(name, which, raw["machines"][which], p["series"],
                                 float(p["first"]), float(p["second"])), raw["placed"]))
    return out


def _checked_pair(path: Path, p: Any, where: str) -> dict[str, Any]:
    """One A/A pair as a move is computed from it: a series name and two positive values."""
    if not isinstance(p, dict):
        raise ConfigError(path, "an A/A pair is an object {series, first, second}", where)
    if not isinstance(p.get("series"), str) or not p["series"]:
        raise ConfigError(path, "an A/A pair names its series (\"series\")", f"{where}/series")
    for side in ("first", "second"):
        value = p.get(side)
        if (not isinstance(value, int | float) or isinstance(value, bool)
                or not math.isfinite(value) or value <= 0):
            raise ConfigError(path, f"{side} must be a positive number (a time or energy "
                                    f"per call), not {value!r}", f"{where}/{side}")
    return p


def used_pairs(pairs: Sequence[tuple[Pair, bool]], gate: Thresholds
               ) -> dict[tuple[str, str], list[Pair]]:
    """(class, measure) -> its pairs measured as the history measures that class now."""
    out: dict[tuple[str, str], list[Pair]] = defaultdict(list)
    for pair, placed in pairs:
        klass, energy = series_class(pair.series, gate)
        if klass.level_by_placement and not placed:
            continue
        out[(klass.name, "energy" if energy else "time")].append(pair)
    return dict(out)


def _r(x: float) -> float:
    return round(x, DIGITS)


def _extreme(pair: Pair) -> dict[str, Any]:
    return {"move": _r(pair.move), "series": pair.series, "file": pair.file, "set": pair.set}


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values``, linear between order statistics (numpy's default:
    q = 1 is the largest, 0.5 the median)."""
    v = sorted(values)
    at = q * (len(v) - 1)
    low = math.floor(at)
    return v[low] if low + 1 >= len(v) else v[low] + (at - low) * (v[low + 1] - v[low])


def figures(pairs: Sequence[Pair], tail_q: float) -> dict[str, Any]:
    """What a measure's pairs give: spread, tail and largest (both ways), the extremes,
    counts."""
    counts: dict[str, int] = defaultdict(int)
    for p in pairs:
        counts[p.file] += 1
    return {"spread": _r(statistics.median(p.both_ways for p in pairs)),
            "tail": _r(quantile([p.both_ways for p in pairs], tail_q)),
            "largest": _r(max(p.both_ways for p in pairs)),
            "rise": _extreme(max(pairs, key=lambda p: p.move)),
            "fall": _extreme(min(pairs, key=lambda p: p.move)),
            "pairs": len(pairs), "series": len({p.series for p in pairs}),
            "from": dict(sorted(counts.items()))}


def _source(fig: dict[str, Any], pairs: Sequence[Pair]) -> str:
    sets: dict[str, list[str]] = defaultdict(list)
    for p in pairs:
        if f"{p.set}: {p.machine}" not in sets[p.file]:
            sets[p.file].append(f"{p.set}: {p.machine}")
    where = "; ".join(f"{f} ({', '.join(s)})" for f, s in sorted(sets.items()))
    rise, fall = fig["rise"], fig["fall"]
    return (f"computed from {fig['pairs']} A/A pairs of {fig['series']} series, {where}: "
            f"median move both ways {100 * fig['spread']:.2f}%, tail {100 * fig['tail']:.2f}%, "
            f"largest "
            f"{100 * fig['largest']:.2f}%; largest rise {100 * rise['move']:+.2f}% "
            f"({rise['series']}), largest fall {100 * fall['move']:+.2f}% ({fall['series']})")


def levels(values: Sequence[float]) -> list[list[float]]:
    """``values`` split at their largest gap: [[low, high, count], [low, high, count]]."""
    v = sorted(values)
    cut = max(range(1, len(v)), key=lambda i: v[i] / v[i - 1])
    return [[v[0], v[cut - 1], cut], [v[cut], v[-1], len(v) - cut]]


def two_levels_shown(split: list[list[float]], threshold: float) -> str:
    """Why ``split`` is not two levels against its class's threshold ('' where it is): each
    level twice or more, each steady to within the threshold, apart by more than it."""
    (lo_a, lo_b, lo_n), (hi_a, hi_b, hi_n) = split
    if min(lo_n, hi_n) < 2:
        return f"a level seen {int(min(lo_n, hi_n))} time(s)"
    if max(lo_b / lo_a, hi_b / hi_a) - 1.0 > threshold:
        return f"a level spreads beyond {100 * threshold:g}%"
    if hi_a / lo_b - 1.0 <= threshold:
        return f"the levels lie within {100 * threshold:g}% of each other"
    return ""


def computed(repo: Path, raw: dict[str, Any], files: Sequence[str],
             gate: Thresholds) -> dict[str, Any]:
    """``raw`` (history-thresholds.json) with every measured figure computed from
    ``files``; entries without data (``spread: null``, ``same_as``) as they are."""
    path = repo / "history-thresholds.json"
    pairs = load_pairs(repo, files)
    named = dict(raw.get("two_level", {}))
    by_measure = used_pairs([(p, placed) for p, placed in pairs if p.series not in named],
                            gate)
    out = json.loads(json.dumps(raw))
    out["data"] = {f: sum(p.file == f for p, _ in pairs) for f in files}
    q = tail_quantile(raw)
    for name, klass in out["classes"].items():
        for measure, entry in klass.items():
            mine = by_measure.pop((name, measure), [])
            if "same_as" in entry or (entry.get("spread") is None and not mine):
                continue
            if not mine:
                raise ConfigError(path, f"no A/A pair of {', '.join(files)} measures "
                                        f"{name} {measure}", f"/classes/{name}/{measure}")
            fig = figures(mine, q)
            klass[measure] = {**fig, "source": _source(fig, mine)}
    if by_measure:
        (name, measure), _ = next(iter(by_measure.items()))
        raise ConfigError(path, f"the data measures {name} {measure}, which has no entry",
                          f"/classes/{name}")
    history = History.from_raw(path, out)
    for series, entry in named.items():
        klass, energy = series_class(series, gate)
        mine = used_pairs([(p, placed) for p, placed in pairs if p.series == series], gate)
        own = next(iter(mine.values()), [])
        if not own:
            raise ConfigError(path, f"no A/A pair of the data measures {series}",
                              f"/two_level/{series}")
        split = levels([v for p, _ in pairs if p.series == series
                        for v in (p.first, p.second)])
        why = two_levels_shown(split, history.threshold(klass, "energy" if energy else "time"))
        if why:
            raise ConfigError(path, f"{series}: the data shows no two levels ({why}); take "
                                    "it out of two_level", f"/two_level/{series}")
        fig = figures(own, q)
        out["two_level"][series] = {"why": entry["why"], "largest": fig["largest"],
                                    "moves": [_r(p.move) for p in own],
                                    "pairs": fig["pairs"], "from": fig["from"],
                                    "levels": [[_sig(a), _sig(b), n] for a, b, n in split]}
    return out


def tail_quantile(raw: dict[str, Any]) -> float:
    """The quantile of a class's moves its ``tail`` is (1: the largest, the rule before
    issue 51)."""
    return float(raw.get("tail_quantile", 1.0))


def _sig(x: float) -> float:
    return float(f"{x:.5g}")


def text(raw: dict[str, Any]) -> str:
    return json.dumps(raw, indent=1, ensure_ascii=False) + "\n"
