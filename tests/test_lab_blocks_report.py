"""tools.lab.blocks_report: arms, held blocks and the three spreads on a made-up result."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tools.lab import blocks_report


def _block(slot: int, round_: int, level_us: float, power_w: float,
           hold_s: float | None = None) -> dict:
    return {"slot": slot, "round": round_, "samples": [level_us * 1e-6] * 3,
            "input_set_medians_s": [level_us * 1e-6 * f for f in (0.99, 1.01)],
            "windows": [{"power_w_mean": power_w}] * 3, "rep_hold_s": hold_s}


def _experiment(hold_known: bool) -> dict:
    slots = [{"plan": {"rep_hold_min_s": 0.0}}, {"plan": {"rep_hold_min_s": 4e-5}}] * 2
    blocks = []
    for r, shift in enumerate((1.0, 1.002)):  # the second round 0.2% slower for all
        for s in range(4):
            floor = s % 2 == 1
            level = (70.0 if floor else 70.5 + 0.5 * (s // 2)) * shift
            hold = (4e-5 if floor else 0.0) if hold_known else None
            blocks.append(_block(s, r, level, 250.0 if floor else 510.0, hold))
    return {"slots": slots, "blocks": blocks}


@pytest.mark.parametrize("hold_known", [True, False])
def test_each_arm_counts_its_held_blocks_and_its_spreads(hold_known: bool) -> None:
    data = _experiment(hold_known)
    top = max(map(blocks_report.mean_power_w, data["blocks"]))
    rows = {json.loads(arm)["plan"]["rep_hold_min_s"]: blocks_report.arm_row(b, top)
            for arm, b in blocks_report.arms(data).items()}
    floor, none = rows[4e-5], rows[0.0]
    assert (floor["blocks"], floor["held"], none["held"]) == (4, 4, 0)
    assert floor["level_us"] == pytest.approx(70.07)  # copies' mean, both rounds
    # the floor's workers agree; without it the two workers sit 0.71% apart, each steady
    assert floor["worker_sd"] == pytest.approx(math.log(1.002) / math.sqrt(2), rel=1e-6)
    assert none["worker_sd"] == pytest.approx(floor["worker_sd"], rel=1e-6)
    assert none["all_sd"] > 0.003 > floor["all_sd"]
    assert floor["round_sd"] == pytest.approx(0.0, abs=1e-12)
    # two asv runs are two workers: the floor's sit together, the others 0.71% apart
    assert floor["between_workers_sd"] == pytest.approx(0.0, abs=1e-12)
    assert none["between_workers_sd"] == pytest.approx(math.log(71.0 / 70.5) / math.sqrt(2),
                                                       rel=1e-6)


def test_an_arm_gives_the_range_of_its_graph_sizes() -> None:
    """Graph-replayed blocks size their graph from their own estimate (85-94 calls for a
    7 us LayerNorm in four runs on H200s vm-nvidia-h200-eb9ed144 and -a32fa316,
    2026-12-04): the report says which sizes an arm's blocks had; blocks timed by events
    have none."""
    data = _experiment(True)
    for i, block in enumerate(data["blocks"]):
        block["mode"], block["calls_per_rep"] = (("graph", 85 + i) if block["slot"] % 2 == 0
                                                 else ("events", 1))
    rows = {json.loads(arm)["plan"]["rep_hold_min_s"]: blocks_report.arm_row(b)
            for arm, b in blocks_report.arms(data).items()}
    assert rows[0.0]["graph_calls"] == (85, 91) and rows[4e-5]["graph_calls"] is None
    text = blocks_report.report(data, "sizes")
    assert "| 85-91 |" in text and "| — |" in text


def test_the_report_reads_a_folder_and_names_a_file_it_cannot_read(tmp_path: Path,
                                                                    capsys) -> None:
    (tmp_path / "hold.json").write_text(json.dumps(_experiment(True)))
    assert blocks_report.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "### hold" in out and out.count("| `{") == 2
    (tmp_path / "zz-broken.json").write_text('{"slots": []}')
    assert blocks_report.main([str(tmp_path)]) == 2
    assert "zz-broken.json: not a tools.lab.blocks result" in capsys.readouterr().err


def test_an_arm_counts_the_blocks_with_a_trial_the_host_fell_behind_in() -> None:
    """A block is behind where any trial ended with fewer than ``host_ahead_reps`` reps
    queued (a 10 us floor's Triton RMSNorm blocks: 0.3-5 reps in some trials, 100-256 in
    the others); a block of unknown queues (older records) is not counted."""
    data = _experiment(True)
    queues = [[204.0, 0.4, 150.0], [255.0] * 3, [121.0, 5.0, 86.0], None]
    for block, queued in zip(data["blocks"], queues * 2, strict=True):
        block["reps_queued"] = queued
    rows = {json.loads(arm)["plan"]["rep_hold_min_s"]: blocks_report.arm_row(b)
            for arm, b in blocks_report.arms(data).items()}
    assert rows[0.0]["host_behind"] == 4 and rows[4e-5]["host_behind"] == 0
    assert not blocks_report.host_behind({"reps_queued": [8.0, None]})


class _FakeWorker:
    """A lab slot's worker: measures a 70 us block, or fails where told to."""

    def __init__(self, fails_on: str | None) -> None:
        self.fails_on, self.closed = fails_on, False

    def request(self, message: dict, timeout_s: float) -> dict:
        from kperf.core.worker import RemoteError

        if message["op"] == self.fails_on:
            raise RemoteError({"error_type": "WrongResult", "message": "max abs err 3.1"})
        if message["op"] == "prepare":
            return {}
        m = {"warmup_s": 1.0, "warmup_trials": 4, "settled": True, "mode": "graph",
             "calls_per_rep": 88, "windows": [{"power_w_mean": 500.0}]}
        return {"measurement": m, "samples": [70e-6] * 3, "number": 30, "pid": 1,
                "energy_per_call_j": 0.01, "measured_at": 0.0}

    def shutdown(self) -> None:
        self.closed = True


@pytest.mark.parametrize("fails_on", ["prepare", "measure"])
def test_a_slot_that_fails_is_that_slots_failure_and_the_others_go_on(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys, fails_on: str) -> None:
    from kperf.gate import workers as gate_workers
    from tools.lab import blocks

    made = iter([_FakeWorker(None), _FakeWorker(fails_on), _FakeWorker(None)])
    monkeypatch.setattr(gate_workers, "gate_worker", lambda *a, **k: next(made))
    slots = [{}, {"plan": {"placements": 16}}, {"plan": {"max_graph_calls": 48}}]
    data = blocks.run({"op": "rmsnorm", "case": "c", "dtype": "bf16", "backend": "triton"},
                      slots, 2, {})
    assert sorted({b["slot"] for b in data["blocks"] if "error" not in b}) == [0, 2]
    assert len([b for b in data["blocks"] if "error" not in b]) == 4
    assert list(data["failed_slots"]) == [1] and "WrongResult" in data["failed_slots"][1]
    assert "slot 1 failed" in capsys.readouterr().err
    path = tmp_path / "exp.json"
    path.write_text(json.dumps(data))  # slots' keys become strings, as on the GPU machine
    text = blocks_report.report(json.loads(path.read_text()), "exp")
    assert text.count("| `{") == 2 and '| 88-88 |' in text
    assert 'Failed: slot 1 (`{"plan": {"placements": 16}}`): ' + fails_on in text


def test_a_slots_before_cases_are_measured_first_in_its_own_worker(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``before``: what a history's worker measured before the case, in order, by the
    slot's own worker, as round -1; the other slots' workers measure none of it."""
    from kperf.gate import workers as gate_workers
    from tools.lab import blocks

    asked: list[list[dict]] = [[], []]

    class Recording(_FakeWorker):
        def __init__(self, i: int) -> None:
            super().__init__(None)
            self.i = i

        def request(self, message: dict, timeout_s: float) -> dict:
            asked[self.i].append(message)
            return super().request(message, timeout_s)

    made = iter([Recording(0), Recording(1)])
    monkeypatch.setattr(gate_workers, "gate_worker", lambda *a, **k: next(made))
    spec = {"op": "rmsnorm", "case": "kv", "dtype": "fp16", "backend": "tilelang"}
    first = [dict(spec, case="hidden", backend=b) for b in ("tilelang", "torch")]
    data = blocks.run(spec, [{}, {"before": first}], 2, {})
    measured = [[m["spec"] for m in msgs if m["op"] == "measure"] for msgs in asked]
    assert measured[0] == [spec, spec]
    assert measured[1] == [*first, spec, spec]
    assert [b.get("spec") for b in data["blocks"] if b["round"] == -1] == first
    assert all(b["slot"] == 1 for b in data["blocks"] if b["round"] == -1)
    assert [len(v) for v in blocks_report.arms(data).values()] == [2, 2]  # not the before
