"""Another process on the GPU during a gate's blocks: the round is measured again; where
the process stays, the case is INCONCLUSIVE naming it (never SLOW, FAST or SAME from rounds
shared with it), its clock gap is not put down to "outside", gate.json lists it per case,
rounds.md marks its rounds; without one, none of it. The fake workers answer as the
measurement core does (``kperf.core.telemetry.processes``), from a process list that holds the
worker itself and its sibling too."""

from __future__ import annotations

import json
from pathlib import Path

from kperf.core.telemetry.processes import Listed, ProcessWatch, ProcFs
from kperf.gate import report
from kperf.gate.disturbed import judge_shared
from kperf.gate.model import Verdict
from kperf.gate.sequential import exit_code, replay
from tests._gate import NORM, OpLog, _run_to_the_end, block, case

NEIGHBOUR = {"pid": 4242, "name": "python", "kind": "compute", "used_mb": 30512.0,
             "busy_s": None, "trials": [0, 1, 2, 3, 4]}


class Sibling:
    """What the workers' process list holds: the measuring worker (pid 300), the gate that
    started it (pid 200) and that gate's other worker (pid 301), in a /proc of their own
    (the test's own parent may be pid 1, as under ``nohup``, which has no relatives);
    and, when ``neighbour`` says so, pid 4242."""

    ME, GATE, OTHER_SIDE = 300, 200, 301

    def __init__(self, root: Path) -> None:
        worker = ["python", "-m", "kperf.core.workerproc", "--slot", "x"]
        for pid, ppid, cmdline in ((self.ME, self.GATE, worker),
                                   (self.OTHER_SIDE, self.GATE, worker),
                                   (self.GATE, 100, ["python", "-m", "kperf.gate"])):
            (root / str(pid)).mkdir(parents=True)
            (root / str(pid) / "stat").write_text(f"{pid} (python) S {ppid} 0 0\n")
            (root / str(pid) / "comm").write_text("python\n")
            (root / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in cmdline))
        self.proc = ProcFs(root)

    def others(self, with_neighbour: bool) -> list[dict] | None:
        listed = [Listed(pid, 1 << 30) for pid in (self.ME, self.GATE, self.OTHER_SIDE)]

        class Source:
            backend = "nvml"

            def processes(self) -> list[Listed]:
                return listed

        watch = ProcessWatch(Source(), proc=self.proc, pid=self.ME)
        watch.begin()
        for trial in range(5):
            watch.trial_ended(trial)
        seen = watch.summary()["others"]
        assert seen == [], seen  # the worker, its gate and the gate's other worker: never named
        return [NEIGHBOUR] if with_neighbour else seen


def _run(tmp_path: Path, th, shared: set[tuple[int, int]], head_scale: float = 1.0,
         head_clock: float = 1980.0) -> tuple[list[str], list[dict], object]:
    """A gate run of one RMSNorm case (80 us) whose head block is ``head_scale`` times its
    base's; pid 4242 is on the GPU during the n-th measure request of round r for every
    (round, request) in ``shared`` (requests 1-2 the first try, 3-4 the second)."""
    requests: dict[int, int] = {}
    rounds: list[int] = []
    sibling = Sibling(tmp_path / "proc")

    class Worker(OpLog):
        def request(self, message: dict, timeout_s: float) -> dict:
            out = super().request(message, timeout_s)
            if message["op"] == "measure":
                r = rounds[-1] if rounds else 1
                requests[r] = requests.get(r, 0) + 1
                scale = head_scale if self.side == "head" else 1.0
                out["samples"] = [80e-6 * scale * w for w in (1.0, 1.0003, 0.9997, 1.0001, 0.9999)]
                m = out["measurement"]
                m["at_cap"] = False
                m["windows"] = [{**w, "throttle_bits_or": 0, "power_w_mean": 400.0,
                                 "sm_clock_mhz_median": head_clock if self.side == "head"
                                 else 1980.0} for w in m["windows"]]
                m["gpu_processes"] = {"others": sibling.others((r, requests[r]) in shared)}
            return out

    clients: dict = {}

    def make_client(slot: str, **kw) -> OpLog:
        return clients.setdefault(slot, Worker(slot, []))

    lines: list[str] = []

    def log(line: str) -> None:
        lines.append(line)
        if line.startswith("round ") and "case(s) on" in line:
            rounds.append(int(line.split()[1].rstrip(":")))

    cases = [{"name": NORM, "kind": "time", "spec": {"case": "norm"}}]
    run = _run_to_the_end(tmp_path, th, cases, make_client, log=log)
    rows = [json.loads(line) for line in (tmp_path / "blocks.jsonl").open()]
    return lines, rows, run


def test_a_round_shared_with_another_process_is_measured_again_and_named(tmp_path: Path,
                                                                          th) -> None:
    lines, rows, run = _run(tmp_path, th, shared={(2, 2)})
    again = [line for line in lines if "measured again" in line]
    assert len(again) == 1 and again[0].startswith("round 2:"), again
    assert "another process (pid 4242, python) used the GPU during the" in again[0]
    assert [r["processes"] for r in rows if r["round"] == 2 and r["retry"] == 1] == [[], []]
    (v,) = run.verdicts()
    assert v.verdict == "SAME" and v.rounds_again == 1
    assert "another process (pid 4242, python) used the GPU in round 2; measured again " \
           "without it" in v.reason
    assert [(p["pid"], p["name"], p["rounds"], p["blocks"]) for p in v.processes] == [
        (4242, "python", [2], 1)]
    data = report.report_json([v], exit_code([v]), {})
    assert data["cases"][0]["processes"][0]["pid"] == 4242
    rounds_md = report.rounds_markdown(_cases(run), [v], th.sequential.host_behind_share)
    assert "(again) (another process in the first try: pid 4242)" in rounds_md


def test_a_process_that_stays_leaves_the_case_inconclusive_naming_it(tmp_path: Path,
                                                                      th) -> None:
    """Head 5% slower at a clock 4% lower, SLOW without a neighbour; pid 4242 on the GPU
    from round 3 on, in both tries: INCONCLUSIVE after round 3, no more blocks measured,
    exit 3; the clock gap is not put down to "outside"."""
    shared = {(r, n) for r in range(3, 9) for n in range(1, 5)}
    _, rows, run = _run(tmp_path, th, shared, head_scale=1.05, head_clock=1900.0)
    (v,) = run.verdicts()
    assert v.verdict == "INCONCLUSIVE" and v.decided and not v.candidate
    assert v.reason.startswith("another process (pid 4242, python) used the GPU in round 3; "
                               "it stayed (round 3 measured again with it still there): no "
                               "verdict from rounds shared with another process")
    assert "from outside" not in v.reason
    assert "clocks differed (base 1980 MHz, head 1900 MHz) with another process on the GPU" \
        in v.reason
    assert v.attribution == "process"
    assert report.fmt_clocks(v) == "1980 → 1900 MHz (another process)"
    assert max(r["round"] for r in rows) == 3 and len(rows) == 8  # rounds 1-2, round 3 twice
    assert exit_code([v]) == 3
    text = report.markdown([v], 3, _info())
    assert "another process (pid 4242, python) used the GPU in round 3" in text
    rounds_md = report.rounds_markdown(_cases(run), [v], th.sequential.host_behind_share)
    assert "(again) (another process: pid 4242)" in rounds_md
    (tmp_path / "alone").mkdir()
    _, _, alone = _run(tmp_path / "alone", th, set(), head_scale=1.05, head_clock=1900.0)
    assert alone.verdicts()[0].verdict == "SLOW"  # what the shared rounds would have said


def test_without_another_process_the_report_says_nothing_of_one(tmp_path: Path, th) -> None:
    _, rows, run = _run(tmp_path, th, shared=set())
    (v,) = run.verdicts()
    assert v.verdict == "SAME" and v.processes == [] and v.rounds_again == 0
    assert all(r["processes"] == [] for r in rows)  # known: none
    text = report.markdown([v], 0, _info())
    rounds_md = report.rounds_markdown(_cases(run), [v], th.sequential.host_behind_share)
    assert "another process" not in text + rounds_md
    assert report.report_json([v], 0, {})["cases"][0]["processes"] == []


def test_no_verdict_from_a_confirmation_round_shared_with_another_process(th) -> None:
    """A SLOW whose fresh pair's rounds were shared with pid 4242: INCONCLUSIVE, naming it."""
    data = case(NORM, [1.0] * 3, [1.05] * 3)
    data.blocks += [block("base", 4, 1.0, confirm=True), block("head", 4, 1.05, confirm=True)]
    data.blocks += [block("base", 5, 1.0, confirm=True), block("head", 5, 1.05, confirm=True)]
    assert replay([data], th)[0].verdict == "SLOW"
    data.blocks[-1].processes = [NEIGHBOUR]
    (v,) = replay([data], th)
    assert v.verdict == "INCONCLUSIVE" and "pid 4242, python" in v.reason
    assert "round 5 shared with it" in v.reason
    unknown = judge_shared(Verdict(NORM, "", "bandwidth", "SAME", decided=True), case(
        NORM, [1.0] * 3, [1.0] * 3))  # blocks of before: processes not known
    assert unknown.verdict == "SAME" and unknown.processes == []


def _cases(run) -> list:
    from kperf.gate.blocks import case_data

    return case_data(run.plan.cases, run.rows)


def _info() -> dict:
    return {"base": "a" * 40, "head": "b" * 40, "base_how": "given", "machine": "m",
            "design": "d", "alpha": 0.01, "beta": 0.05, "correction": "BH"}
