"""The gate's exit code, from real runs of ``kperf gate --no-run`` on PR folders
made here: each code for what it means (docs/gate.md, "Exit codes"), and 4 (the gate
itself failed), naming the file, for every way the gate can fail, never 1 (a crash read as
a regression), 2 (argparse's usage error read as "a benchmark broke") or 0 and 3 for a run
that judged nothing (CI passes both)."""

from __future__ import annotations

import errno
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kperf.gate import cli, report
from kperf.gate.blocks import BlockLog
from kperf.gate.errors import (
    EXIT_BROKEN,
    EXIT_GATE_ERROR,
    EXIT_INCONCLUSIVE,
    EXIT_PASS,
    EXIT_REGRESSION,
)
from kperf.gate.model import Block
from kperf.gate.plan import GatePlan, Lane, write_state
from kperf.project import DEFAULTS
from tests._tmpfs import UNSHARE, needs_tmpfs

REPO = Path(__file__).resolve().parent.parent
REGISTERS = "bench_gemm.GemmRegisters.track_value('sm_90a', 'fp16', 'triton')"
SHARED = "bench_gemm.GemmSharedMem.track_value('sm_90a', 'fp16', 'triton')"


def static_case(name: str = REGISTERS) -> dict:
    return {"name": name, "kind": "static", "unit": "registers", "target": "sm_90a",
            "figure": "registers", "spec": {"op": "gemm", "case": "square-8192",
                                            "dtype": "fp16", "backend": "triton"}}


def figure(side: str, value: float | None, status: str = "ok", error: str = "") -> Block:
    return Block(side, 1, status, error, value=value)


def make_pr(root: Path, blocks: dict[str, list[Block]], **state: object) -> Path:
    """A PR folder as a finished run leaves it: gate-state.json and blocks.jsonl, written
    by the gate's own writers; ``state`` replaces fields of gate-state.json."""
    pr = root / "pr"
    cases = [static_case(name) for name in blocks]
    plan = GatePlan(REPO, pr, "a" * 40, "b" * 40, "given", "m", cases,
                    [Lane(cases=list(blocks))], ops=["gemm"])
    pr.mkdir(parents=True)
    write_state(pr, {**plan.state(), "status": "done", "unchanged": {}, "stopped": "done",
                     **state})
    log = BlockLog(pr / "blocks.jsonl")
    for name, measured in blocks.items():
        for block in measured:
            log.append({"name": name}, block, {})
    return pr


def gate(pr: Path, *extra: str, out: Path | None = None) -> tuple[int, dict, str]:
    """A real run of the CLI: its exit code, gate.json and stderr."""
    cmd = [sys.executable, "-m", "kperf.gate", "--repo", str(REPO), "--no-run",
           "--pr-dir", str(pr), *extra]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    report_path = (out or pr) / "gate.json"
    data = json.loads(report_path.read_text()) if report_path.exists() else {}
    return done.returncode, data, done.stdout + done.stderr


SAME = [figure("base", 64.0), figure("head", 64.0)]


@pytest.mark.parametrize(("blocks", "code", "says"), [
    ({REGISTERS: SAME}, EXIT_PASS, "SAME"),
    ({REGISTERS: [figure("base", 64.0), figure("head", 96.0)]}, EXIT_REGRESSION, "SLOW"),
    ({REGISTERS: [figure("base", 64.0), figure("head", None, "failed", "RemoteError: NaN")],
      SHARED: [figure("base", 1.0), figure("head", 2.0)]}, EXIT_BROKEN, "failed at head"),
    ({REGISTERS: [figure("base", None, "skipped", "RemoteSkip: no such op"),
                  figure("head", 64.0)]}, EXIT_INCONCLUSIVE, "skipped at base"),
    ({REGISTERS: [figure("base", None, "failed", "RemoteError: base is broken"),
                  figure("head", 64.0)]}, EXIT_INCONCLUSIVE, "failed at base"),
], ids=["pass", "regression", "broken-beats-regression", "new-at-head", "failed-at-base-only"])
def test_each_exit_code_from_a_real_run(tmp_path: Path, blocks: dict, code: int,
                                        says: str) -> None:
    """A failure at base only is no baseline (3), not the PR's breakage (2)."""
    rc, data, log = gate(make_pr(tmp_path, blocks))
    assert rc == code and data["exit_code"] == code, log
    assert any(says in f"{c['verdict']} {c['reason']}" for c in data["cases"]), data
    assert (tmp_path / "pr" / "gate.md").read_text().startswith(report.COMMENT_MARKER)


def test_a_case_wrong_at_head_reads_broken_in_its_row_and_counts_once(tmp_path: Path) -> None:
    """Issue 51: an off-by-one mask's wrong values at head are the clearest finding; the
    row says BROKEN and why, and the summary counts each case once."""
    rc, data, log = gate(make_pr(tmp_path, {
        REGISTERS: [figure("base", 64.0), figure("head", None, "failed",
                                                  "RemoteError: WrongResult: max abs error "
                                                  "0.5 at [0, 4095]")],
        SHARED: SAME}))
    assert rc == EXIT_BROKEN, log
    text = (tmp_path / "pr" / "gate.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| bench\\_gemm.GemmReg"))
    assert "**BROKEN**: failed at head" in row and "WrongResult" in row, row
    assert "0 slower, 0 faster, 1 same, 0 inconclusive, 1 broken of 2 cases" in text, text
    broken = next(c for c in data["cases"] if c["case"] == REGISTERS)
    assert broken["broke"] is True and "WrongResult" in broken["reason"]


def _bad_state(root: Path, field: str, value: object) -> Path:
    return make_pr(root, {REGISTERS: SAME}, **{field: value})


@pytest.mark.parametrize(("field", "value"), [
    ("base", None), ("head", "../../victim"), ("base", "/abs/path"), ("cases", []),
    ("lanes", "x"), ("machine", "m\u202e")])
def test_a_malformed_state_is_the_gates_failure_naming_file_and_field(
        tmp_path: Path, field: str, value: object) -> None:
    """``"base": null`` was a TypeError outside the gate's ``try`` (exit 1, "regression");
    ``"cases": []`` passed (exit 0) having judged nothing."""
    pr = _bad_state(tmp_path, field, value)
    rc, data, log = gate(pr)
    assert rc == EXIT_GATE_ERROR and data["status"] == "GATE ERROR", log
    assert f"{pr / 'gate-state.json'}: field /{field}" in data["error"], data["error"]
    assert "Traceback" not in log


def test_a_block_round_of_a_billion_is_refused_not_replayed(tmp_path: Path) -> None:
    pr = make_pr(tmp_path, {REGISTERS: SAME})
    rows = (pr / "blocks.jsonl").read_text().splitlines()
    rows[1] = json.dumps({**json.loads(rows[1]), "round": 1_000_000_000})
    (pr / "blocks.jsonl").write_text("\n".join(rows) + "\n")
    rc, data, log = gate(pr)  # before: replayed look after look until killed
    assert rc == EXIT_GATE_ERROR, log
    assert f"{pr / 'blocks.jsonl'}:2: field /round" in data["error"], data


@pytest.mark.parametrize("what", ["empty folder", "no folder", "no blocks.jsonl",
                                  "skipped on both sides"])
def test_nothing_judged_is_never_a_pass_or_inconclusive(tmp_path: Path, what: str) -> None:
    """An empty --pr-dir under --no-run exited 3, which CI passes; exit 0 and 3 need a
    case that was judged."""
    skipped = [figure(side, None, "skipped", "RemoteSkip: no such op") for side in
               ("base", "head")]
    pr = (make_pr(tmp_path, {REGISTERS: skipped if what.startswith("skipped") else SAME})
          if what in ("no blocks.jsonl", "skipped on both sides") else tmp_path / "pr")
    if what == "empty folder":
        pr.mkdir()
    if what == "no blocks.jsonl":
        (pr / "blocks.jsonl").unlink()
    rc, data, log = gate(pr)
    assert rc == EXIT_GATE_ERROR and data["status"] == "GATE ERROR", log
    named = {"empty folder": "gate-state.json", "no folder": "gate-state.json",
             "no blocks.jsonl": "blocks.jsonl", "skipped on both sides": "nothing was judged"}
    assert named[what] in data["error"], data["error"]


def test_bad_thresholds_and_a_bad_command_line_exit_4(tmp_path: Path) -> None:
    pr = make_pr(tmp_path, {REGISTERS: SAME})
    raw = json.loads((DEFAULTS / "thresholds.json").read_text())
    raw["sequential"]["min_rounds"] = 3.0
    (tmp_path / "t.json").write_text(json.dumps(raw))
    rc, data, log = gate(pr, "--thresholds", str(tmp_path / "t.json"))
    assert rc == EXIT_GATE_ERROR, log
    assert f"{tmp_path / 't.json'}: field /sequential/min_rounds" in data["error"], data
    rc, _, log = gate(pr, "--max-rows", "many")  # argparse's own exit code is 2: "broke"
    assert rc == EXIT_GATE_ERROR and "--max-rows" in log, log


def test_a_crash_anywhere_exits_4_naming_where(tmp_path: Path, monkeypatch, capsys) -> None:
    """A bug of the gate (here the report's writer raising KeyError) is never a verdict:
    exit 4, gate.json saying where it failed and which run it was judging."""
    pr = make_pr(tmp_path, {REGISTERS: SAME})

    def broken(*args: object, **kwargs: object) -> str:
        raise KeyError("base")

    monkeypatch.setattr(report, "markdown", broken)
    assert cli.main(["--repo", str(REPO), "--no-run", "--pr-dir", str(pr)]) == EXIT_GATE_ERROR
    data = json.loads((pr / "gate.json").read_text())
    assert data["status"] == "GATE ERROR" and "KeyError" in data["error"], data
    assert "kperf/gate/cli.py:" in data["error"] and str(pr) in data["error"], data
    assert "Traceback" in capsys.readouterr().err  # the whole story, for whoever debugs it


def test_a_full_disk_while_writing_the_report_exits_4_naming_it(tmp_path: Path, monkeypatch,
                                                               capsys) -> None:
    """(**simulated**: the report's write raises ENOSPC.) A run that passed, then a full
    disk writing gate.json: exit 4 naming the file, never 1."""
    import kperf.core.record

    pr = make_pr(tmp_path, {REGISTERS: SAME})
    out = tmp_path / "out"

    def full(path: Path, payload: dict) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(kperf.core.record, "atomic_write_json", full)
    code = cli.main(["--repo", str(REPO), "--no-run", "--pr-dir", str(pr), "--out", str(out)])
    assert code == EXIT_GATE_ERROR
    assert f"{out / 'gate.json'}: cannot be written (No space left on device)" \
        in capsys.readouterr().err


def test_resume_never_deletes_outside_the_pr_folder(tmp_path: Path) -> None:
    """--resume rebuilt a side in ``<pr-dir>/sides/<base[:12]>`` after deleting it; a base
    of ``../../victim`` in gate-state.json deleted a folder beside the PR folder."""
    from kperf.gate.plan import sites_for
    from kperf.paths import PathError

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    pr = make_pr(tmp_path, {REGISTERS: SAME}, base="../../victim")
    code = cli.main(["--repo", str(REPO), "--resume", "--pr-dir", str(pr)])
    assert code == EXIT_GATE_ERROR
    assert "gate-state.json: field /base" in json.loads((pr / "gate.json").read_text())["error"]
    assert (victim / "keep.txt").read_text() == "mine"
    # the last guard, should a plan ever carry such a commit id past the schema
    plan = cli.plan_of({**cli.read_state(make_pr(tmp_path / "2", {REGISTERS: SAME})),
                        "base": "../../victim"}, REPO, pr)
    with pytest.raises(PathError, match=re.escape("base commit '../../victim' is not a plain")):
        sites_for(plan)
    assert (victim / "keep.txt").read_text() == "mine"


@needs_tmpfs
def test_a_full_disk_under_the_report_on_a_real_tmpfs(tmp_path: Path) -> None:
    """(**real**: a 64 KiB tmpfs, filled.) The run passed; gate.json cannot be written."""
    pr = make_pr(tmp_path, {REGISTERS: SAME})
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    script = (f"mount -t tmpfs -o size=64k tmpfs {mnt} && mkdir {mnt}/out && "
              f"(dd if=/dev/zero of={mnt}/fill bs=4k count=64 2>/dev/null; true) && "
              f"cd {REPO} && {sys.executable} -m kperf.gate --repo {REPO} --no-run "
              f"--pr-dir {pr} --out {mnt}/out; echo rc=$?; ls -A {mnt}/out")
    done = subprocess.run([*UNSHARE, script], capture_output=True, text=True, timeout=120)
    assert "rc=4" in done.stdout, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == "rc=4", "files were left on the full disk"
    assert f"{mnt}/out/rounds.md: cannot be written (No space left on device)" in done.stderr
    assert f"{mnt}/out/gate.json: cannot be written" in done.stderr  # the failure report
