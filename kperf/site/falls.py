"""Steps down of the series where lower is worse, onto asv's regressions page.

asv's step detection flags rises only (``asv.step_detect.detect_regressions``: "a
regression means an upward step"), so an occupancy that falls from 3 to 2 waves, the
change that costs a kernel its latency hiding, was never flagged. For every series whose
rule in thresholds.json says ``higher_is_better`` this runs asv's own step detection on the
reciprocal of its values (a fall of x is a rise of 1/x, so asv's relative thresholds mean
the same) and adds what it finds to ``regressions.json`` in asv's own entry format, with
the values as measured: asv's page shows the fall with its factor (0.67x) and kperf's
pages give its cause (kperf/site/steps.py, ``explain_code``).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any

from kperf.config import ConfigError
from kperf.gate.config import Thresholds


def _reciprocal(value: Any) -> float | None:
    """1/value; None for a missing point; an occupancy of 0 (cannot launch) as the worst."""
    if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
        return None
    return 1.0 / max(float(value), 1e-3)


def _series(points: list[list[Any]], j: int | None) -> list[tuple[int, float | None]]:
    return [(int(rev), _reciprocal(v if j is None else (v[j] if isinstance(v, list)
                                                       and j < len(v) else None)))
            for rev, v in points]


def falls_of(points: list[list[Any]], j: int | None,
             threshold: float) -> tuple[float, float, list[list[Any]]] | None:
    """(latest value, best value, jumps) of one series' falls past ``threshold``, in the
    measured units: asv's detection on the reciprocal, then turned back. None: no fall."""
    from asv.step_detect import detect_regressions, detect_steps

    data = [(rev, y) for rev, y in _series(points, j) if y is not None]
    if len(data) < 2:
        return None
    steps = detect_steps([y for _, y in data], [None] * len(data))
    revs = [rev for rev, _ in data]
    steps = [(revs[left], revs[right - 1] + 1, val, low, err)
             for left, right, val, low, err in steps]
    last, best, jumps = detect_regressions(steps, threshold)
    if not jumps:
        return None
    return (1.0 / last, 1.0 / best,
            [[a, b, 1.0 / before, 1.0 / after] for a, b, before, after in jumps])


def _graph_path(params: dict[str, Any], benchmark: str) -> str:
    from asv.graph import Graph

    return Graph.get_file_path(params, benchmark).replace("\\", "/")


def _one_commit(repo: Path, first: str, second: str) -> bool:
    out = subprocess.run(["git", "rev-list", "--count", f"{first}..{second}"], cwd=repo,
                         capture_output=True, text=True)
    return out.returncode == 0 and out.stdout.strip() == "1"


# an occupancy is the one static figure that is better higher: its falls must be flagged
OCCUPANCY = re.compile(r"Occupancy\.track_value$")


def add_falls(html_dir: Path, conf: dict[str, Any], thresholds_path: Path,
              repo: Path) -> list[str]:
    """Add the falls of every higher-is-better series to ``regressions.json``; returns the
    series flagged. Needs the site asv just published (index.json, graphs/)."""
    from kperf.gate.asvio import asv_threshold

    th = Thresholds.load(thresholds_path)  # a ConfigError naming the file: the caller's
    try:
        index = json.loads((html_dir / "index.json").read_text())
        regressions = json.loads((html_dir / "regressions.json").read_text())
    except (OSError, ValueError):
        return []  # no site asv published: nothing to add (publish says so)
    table = conf.get("regressions_thresholds") if isinstance(conf, dict) else None
    all_params = index.get("params") or {}
    to_hash = {int(r): h for r, h in (index.get("revision_to_hash") or {}).items()}
    added: list[str] = []
    for name, bench in sorted((index.get("benchmarks") or {}).items()):
        combos = list(itertools.product(*bench["params"])) if bench.get("params") else [None]
        probe = f"{name}({', '.join(combos[0])})" if combos[0] else name
        if not th.rule_for(probe)[0].higher_is_better:
            if OCCUPANCY.search(name):  # never a fall of its own: a rule lost it
                raise ConfigError(thresholds_path, f"no rule marks {name} higher-is-better "
                                  f"(its class's rule: {th.rule_for(probe)[1].name}), so an "
                                  f"occupancy that falls would go unflagged: a typo in a "
                                  f"rule's \"match\"?", "/rules")
            continue
        for params in index.get("graph_param_list") or []:
            path = html_dir / (_graph_path(params, name) + ".json")
            if not path.exists():
                continue
            points = json.loads(path.read_text())
            shown = {k: v for k, v in params.items() if len(all_params.get(k) or []) > 1}
            for j, combo in enumerate(combos):
                entry = f"{name}({', '.join(combo)})" if combo else name
                found = falls_of(points, j if combo else None,
                                 asv_threshold(table, entry) if table else 0.0)
                if found is None:
                    continue
                last, best, jumps = found
                for jump in jumps:
                    if jump[0] is not None and _one_commit(repo, to_hash[jump[0]],
                                                           to_hash[jump[1]]):
                        jump[0] = None  # asv's convention: one commit is the culprit
                regressions.setdefault("regressions", []).append(
                    [entry, _graph_path(params, name) + ".json", shown,
                     j if combo else None, last, best, jumps])
                added.append(entry)
    (html_dir / "regressions.json").write_text(json.dumps(regressions, separators=(",", ":")))
    return added
