"""The falls of higher-is-better series on a published site (kperf/site/falls.py), over a
real git history: one commit between the points is named as the culprit (asv's own
convention: no start revision), a longer range is not; every benchmark and machine is
looked at, whatever comes before it; series without parameters too. Written for the
survivors of mutmut over the module (docs/reliability.md, "mutmut")."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from kperf.project import DEFAULTS
from kperf.site import falls

OCC = "bench_gemm.GemmOccupancy.track_value"
REGS = "bench_attention.AttentionRegisters.track_value"  # sorts first, never flagged
PLAIN = "bench_rope.RopeOccupancy.track_value"  # no parameters


def _commits(repo: Path, n: int) -> list[str]:
    run = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True,
                                    capture_output=True, text=True).stdout.strip()
    run("init", "-q")
    for i in range(n):
        run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
            "-m", f"c{i}")
    return run("rev-list", "--reverse", "HEAD").split()


def _site(tmp_path: Path, hashes: list[str], series: dict[str, list]) -> Path:
    """Two machines (m0 without graphs), each benchmark's values at revisions 0, 1, ...
    (None: not measured there)."""
    html = tmp_path / "html"
    machines = [{"arch": "x86_64", "branch": "main", "machine": m} for m in ("m0", "m1")]
    index = {"benchmarks": {b: {"params": [] if b == PLAIN else [["'gfx942'"]]}
                            for b in series},
             "params": {"arch": ["x86_64"], "branch": ["main"], "machine": ["m0", "m1"]},
             "graph_param_list": machines,
             "revision_to_hash": {str(i): h for i, h in enumerate(hashes)}}
    for bench, values in series.items():
        path = html / (falls._graph_path(machines[1], bench) + ".json")
        path.parent.mkdir(parents=True, exist_ok=True)
        points = [[i, v if bench == PLAIN else [v]] for i, v in enumerate(values)
                  if v is not None]
        path.write_text(json.dumps(points))
    (html / "index.json").write_text(json.dumps(index))
    (html / "regressions.json").write_text(json.dumps({"regressions": []}))
    return html


def test_falls_name_one_commit_as_the_culprit_and_every_series_is_seen(tmp_path: Path) -> None:
    hashes = _commits(tmp_path, 6)
    html = _site(tmp_path, hashes, {
        REGS: [100, 100, 100, 80, 80, 80],
        OCC: [3, 3, 3, 2, 2, 2],  # falls between revisions 2 and 3: one commit
        PLAIN: [8, 8, None, None, 4, 4]})  # between 1 and 4: three commits
    added = falls.add_falls(html, {}, DEFAULTS / "thresholds.json", tmp_path)
    assert added == [f"{OCC}('gfx942')", PLAIN]
    got = {e[0]: e for e in json.loads((html / "regressions.json").read_text())["regressions"]}
    occ, plain = got[f"{OCC}('gfx942')"], got[PLAIN]
    assert occ[1] == falls._graph_path({"arch": "x86_64", "branch": "main", "machine": "m1"},
                                       OCC) + ".json"
    assert occ[2] == {"machine": "m1"} and occ[3] == 0 and plain[3] is None
    assert occ[4:] == [2.0, 3.0, [[None, 3, 3.0, 2.0]]]  # one commit: no start revision
    assert plain[4:] == [4.0, 8.0, [[1, 4, 8.0, 4.0]]]
    assert falls._one_commit(tmp_path, hashes[2], hashes[3])
    assert not falls._one_commit(tmp_path, hashes[1], hashes[4])
    assert not falls._one_commit(tmp_path, "0" * 40, hashes[3])  # git fails: not one


def test_a_points_value_is_read_as_measured(tmp_path: Path) -> None:
    """An occupancy of 0 (cannot launch) is the worst value, not a division by zero; a
    missing or NaN point, a flag or a value past the list are no point at all."""
    assert falls._reciprocal(0) == 1000.0 and falls._reciprocal(2) == 0.5
    for nothing in (None, float("nan"), True, "3"):
        assert falls._reciprocal(nothing) is None
    points = [[0, [3, 1]], [1, [2]], [2, 4]]
    assert falls._series(points, 1) == [(0, 1.0), (1, None), (2, None)]
    assert falls._series([[0, 2], [1, 4]], None) == [(0, 0.5), (1, 0.25)]
    assert falls.falls_of([[0, [3]], [1, [2]]], 0, 0.0) is not None  # two points suffice
    assert falls.falls_of([[0, [3]]], 0, 0.0) is None
