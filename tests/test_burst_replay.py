"""tools/lab/burst_replay.py: what shorter or fewer energy bursts would have read."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from tools.lab import burst_replay

GEMM = "bench_gemm.GemmTime.track_time"
CASE = {"case": "square-8192", "dtype": "fp16", "backend": "triton"}
ENERGY = "bench_gemm.GemmEnergy.track_energy('square-8192', 'fp16', 'triton')"


def burst(ramp_w: float, level_w: float, device_s: float = 0.4, calls: int = 200) -> dict:
    """A 0.4 s burst whose counter moves every 0.1 s from 0.05 s on: ``ramp_w`` until
    0.15 s, then ``level_w``."""
    times = [0.05, 0.15, 0.25, 0.35]
    joules, updates = 0.0, [[0.05, 0.0]]
    for t0, t1 in itertools.pairwise(times):
        joules += (ramp_w if t1 <= 0.15 else level_w) * (t1 - t0)
        updates.append([t1, joules])
    watts = joules / (times[-1] - times[0])
    return {"calls": calls, "device_s": device_s, "span_s": 0.4, "updates": updates,
            "power_w": watts, "counter_updates": len(updates), "figure": watts * device_s / calls}


def write_run(folder: Path, bursts: list[dict], name: str = "a") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    record = {"kind": "time", "benchmark": GEMM, "params": CASE, "measurement": {
        "energy_burst": {"per_burst": [{k: v for k, v in b.items() if k != "figure"}
                                       for b in bursts],
                         "energy_per_call_j": [b["figure"] for b in bursts]}}}
    (folder / f"{name}.json").write_text(json.dumps(record, sort_keys=True))  # as written
    return folder


def test_a_shorter_burst_reads_only_the_counter_updates_inside_its_length() -> None:
    b = burst(ramp_w=400.0, level_w=300.0)
    per_call = 0.4 / 200
    assert burst_replay.burst_energy(b, None, 0.16) == pytest.approx(400.0 * per_call)
    assert burst_replay.burst_energy(b, None, 0.4) == pytest.approx(b["figure"])
    assert burst_replay.burst_energy(b, None, 0.1) is None  # one update: no span
    assert burst_replay.burst_energy(b, 0.123, burst_replay.FULL) == 0.123  # as recorded


def test_the_spread_per_length_and_count_compares_the_same_case_in_both_runs(
        tmp_path: Path, capsys) -> None:
    """Both runs level at 300 W; the second's first burst ramps at 330 W instead of 400 W,
    its later bursts at 310 W: a 0.16 s burst reads the ramp, the whole burst mostly the level."""
    first = write_run(tmp_path / "a", [burst(400.0, 300.0)] * 3)
    second = write_run(tmp_path / "b", [burst(330.0, 300.0), burst(310.0, 300.0),
                                        burst(310.0, 300.0)])
    runs = burst_replay.load(first), burst_replay.load(second)
    assert list(runs[0]) == [ENERGY]
    short_one = burst_replay.spreads(*runs, 0.16, 1)
    assert short_one == {"compute": (pytest.approx(70 / 400), 1, 0)}
    short_three = burst_replay.spreads(*runs, 0.16, 3)["compute"][0]
    assert short_three == pytest.approx(90 / 400)  # the median burst: 310 against 400 W
    as_run = burst_replay.spreads(*runs, burst_replay.FULL, 1)["compute"][0]
    whole = burst(400.0, 300.0)["figure"]
    assert as_run == pytest.approx(abs(burst(330.0, 300.0)["figure"] / whole - 1))
    assert burst_replay.spreads(*runs, 0.1, 1) == {"compute": (pytest.approx(float("nan"),
                                                                             nan_ok=True), 0, 1)}
    assert burst_replay.main([str(first), str(second), "--lengths", "0.16,0"]) == 0
    out = capsys.readouterr().out
    assert "| 1 | 0.16 s | compute | 17.50% | 1 | 0 |" in out
    assert "| 3 | as run | compute |" in out


def test_runs_with_no_case_in_common_or_a_broken_record_are_an_error(tmp_path: Path,
                                                                       capsys) -> None:
    first = write_run(tmp_path / "a", [burst(400.0, 300.0)])
    (tmp_path / "empty").mkdir()
    assert burst_replay.main([str(first), str(tmp_path / "empty")]) == 2
    assert "no timed case with energy bursts in both" in capsys.readouterr().err
    (tmp_path / "a" / "broken.json").write_text("{")
    with pytest.raises(SystemExit, match=r"broken\.json: not a record"):
        burst_replay.load(first)
    with pytest.raises(SystemExit):
        burst_replay.main([str(first), str(first), "--bursts", "0"])


def test_a_third_burst_only_where_the_first_two_differ(tmp_path: Path, capsys) -> None:
    """Two bursts agreeing within the tolerance: their mean, two taken; otherwise the median
    of three, three taken; the spread per class compares the two runs' figures."""
    def run(folder: str, figures: list[float]) -> dict:
        bursts = [dict(burst(300.0, 300.0), figure=f) for f in figures]
        return burst_replay.load(write_run(tmp_path / folder, bursts))

    first = run("a", [1.000, 1.004, 1.100])  # the first two agree within 1%
    second = run("b", [1.000, 1.040, 1.030])  # they do not: median of three
    assert burst_replay.adaptive_figure(first[ENERGY], 0.01) == (pytest.approx(1.002), 2)
    assert burst_replay.adaptive_figure(second[ENERGY], 0.01) == (pytest.approx(1.030), 3)
    assert burst_replay.adaptive_figure(second[ENERGY], 0.05) == (pytest.approx(1.020), 2)
    assert burst_replay.adaptive_spreads(first, second, 0.01) == {
        "compute": (pytest.approx(1.030 / 1.002 - 1), 1, 2.5)}
    assert burst_replay.main([str(tmp_path / "a"), str(tmp_path / "b"), "--bursts", "3",
                              "--agree", "0.01"]) == 0
    assert "| 1.0% | compute | 2.79% | 1 | 2.50 |" in capsys.readouterr().out
    assert burst_replay.adaptive_figure({"energy_per_call_j": [1.0, 1.0]}, 0.01) == (None, 0)
