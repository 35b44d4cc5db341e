"""Other processes on the GPU: NVML's and amdsmi's process lists (through a fake pynvml and
the fake libamd_smi.so under the real amdsmi package), this process and its sibling worker
left out by what /proc says of real processes, the pids of another namespace said to be
unknown, and what a measurement records."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kperf.core.telemetry import NullSource
from kperf.core.telemetry.amd import AmdSmiSource
from kperf.core.telemetry.nvml import NvmlSource
from kperf.core.telemetry.processes import (
    Listed,
    ProcessesUnavailable,
    ProcessWatch,
    ProcFs,
    record_note,
    records_note,
    spans,
)
from kperf.core.telemetry.sysfs import SysfsSource
from kperf.core.timing import Plan, measure
from tests.fake_amdsmi import FakeState, use_fake_amdsmi
from tests.fakes import FAST, FakeGpu, FakeKernel, ScriptedSource
from tests.test_telemetry_amd import make_sysfs
from tests.test_telemetry_nvml import NVMLError, NVMLError_NotSupported, fake_pynvml
from tools.lab.experiments.gpu_neighbour import time_looks

SLEEP = "import time; time.sleep(120)"


@dataclass
class Relatives:
    """Real processes: ``me`` (a measuring worker) and ``sibling`` (the other side's worker:
    ``-m kperf.core.workerproc`` on its command line) and ``plain`` (no worker), all three
    started by this test process (the gate); ``other`` started by another process."""

    me: int
    sibling: int
    plain: int
    other: int
    started: list[subprocess.Popen] = field(default_factory=list)


def _until_it_runs(pid: int, runs: Callable[[int], bool], timeout_s: float = 30.0) -> None:
    """Wait until /proc says ``pid`` runs what it was started for (``runs``)."""
    deadline = time.monotonic() + timeout_s
    while not runs(pid):
        assert time.monotonic() < deadline, f"pid {pid}: {ProcFs().cmdline(pid)}"
        time.sleep(0.01)


@pytest.fixture
def relatives() -> Iterator[Relatives]:
    started = [subprocess.Popen([sys.executable, "-c", SLEEP]),
               subprocess.Popen([sys.executable, "-c", SLEEP, "-m", "kperf.core.workerproc"]),
               subprocess.Popen([sys.executable, "-c", SLEEP]),
               subprocess.Popen(["sh", "-c", "sleep 120 & echo $!; wait"], stdout=subprocess.PIPE,
                                text=True)]
    other = int(started[3].stdout.readline())
    try:
        # a child is read as what it runs only once it has exec'd: before, /proc shows the
        # forked parent (this pytest; the shell for ``other``), as it did under a load
        # average of 5 beside another checkout's runs (2026-12-06)
        for pid, word in ((started[0].pid, "time.sleep"), (started[1].pid, "kperf.core.workerproc"),
                          (started[2].pid, "time.sleep")):
            _until_it_runs(pid, lambda p, w=word: w in " ".join(ProcFs().cmdline(p)))
        _until_it_runs(other, lambda p: ProcFs().comm(p) == "sleep")
        yield Relatives(*(p.pid for p in started[:3]), other=other, started=started)
    finally:
        os.kill(other, signal.SIGTERM)
        for proc in started:
            proc.kill()
            proc.wait()


@dataclass
class Lister:
    """A telemetry source whose process list follows a script (a list per look)."""

    lists: Callable[[int], list[Listed]]
    backend: str = "fake"
    reason: str = "scripted"
    lag_s: float = 0.0
    calls: int = 0

    def processes(self) -> list[Listed]:
        self.calls += 1
        return self.lists(self.calls)


def test_this_process_its_parent_and_its_sibling_worker_are_left_out(relatives: Relatives
                                                                     ) -> None:
    listed = [Listed(pid, 512 << 20) for pid in (relatives.me, relatives.sibling,
                                                 os.getpid(), relatives.plain, relatives.other)]
    watch = ProcessWatch(Lister(lambda _: listed), pid=relatives.me)
    watch.begin()
    watch.trial_ended(0)
    seen = watch.summary()["others"]
    assert [e["pid"] for e in seen] == sorted([relatives.plain, relatives.other])
    names = {e["pid"]: e["name"] for e in seen}
    assert names[relatives.other] == "sleep" and names[relatives.plain].startswith("python")
    assert all(e["used_mb"] == 512.0 and e["trials"] == [0] for e in seen)
    # an orphan (parent pid 1) has no relatives: its parent's other workers are others
    orphan = ProcessWatch(Lister(lambda _: listed), proc=OrphanProc(relatives.me),
                          pid=relatives.me)
    orphan.begin()
    orphan.trial_ended(0)
    assert relatives.sibling in {e["pid"] for e in orphan.summary()["others"]}


class OrphanProc(ProcFs):
    """/proc, but ``me`` was reparented to init (pid 1): the process that started it is gone."""

    def __init__(self, me: int) -> None:
        super().__init__()
        self.me = me

    def ppid(self, pid: int) -> int | None:
        return 1 if pid == self.me else super().ppid(pid)


def test_pids_of_another_namespace_are_kept_unnamed_and_unknown() -> None:
    """In a container the driver lists the host's pids: this process is not among them,
    so which are this run's own cannot be told; the measurement says so."""
    listed = [Listed(9_000_001, 2 << 30), Listed(9_000_002, 1 << 30)]
    watch = ProcessWatch(Lister(lambda _: listed))
    watch.begin()
    watch.trial_ended(0)
    out = watch.summary()
    assert out["others"] is None and "another pid namespace" in out["note"]
    assert [e["pid"] for e in out["foreign"]] == [9_000_001, 9_000_002]
    assert "name" not in out["foreign"][0]
    empty = ProcessWatch(Lister(lambda _: []))
    empty.begin()
    assert empty.summary()["others"] is None
    assert "not even this one" in empty.summary()["note"]


def _container_proc(root: Path, holders: dict[int, bytes]) -> ProcFs:
    """A /proc of a container's pid namespace: each pid's open /dev/nvidia0 and its maps."""
    for pid, maps in holders.items():
        (root / str(pid) / "fd").mkdir(parents=True)
        (root / str(pid) / "fd" / "3").symlink_to("/dev/nvidia0")
        (root / str(pid) / "maps").write_bytes(maps)
        (root / str(pid) / "stat").write_text(f"{pid} (python) S 1 1 1")
    return ProcFs(root)


def test_in_a_container_the_processes_outside_are_counted(tmp_path: Path) -> None:
    """Issue 51: in the GPU job's container the driver's pids are the host's, so none can
    be named; the processes here that hold a context on the GPU (node open, CUDA driver
    mapped; NVML alone maps no libcuda) are this run's, and one more listed is a
    neighbour outside: counted, and seen in the trials it was listed in."""
    cuda = b"7f00 r-xp 00000000 00:00 0 /usr/lib/x86_64-linux-gnu/libcuda.so.580\n"
    nvml = b"7f00 r-xp 00000000 00:00 0 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n"
    proc = _container_proc(tmp_path / "proc", {100: cuda, 101: cuda, 102: nvml})

    @dataclass
    class InContainer(Lister):
        def device_node(self) -> str:
            return "/dev/nvidia0"

    ours = [Listed(7_000_100, 1 << 30), Listed(7_000_101, 1 << 30)]
    neighbour = Listed(7_000_555, 4 << 30)
    watch = ProcessWatch(InContainer(lambda call: ours + ([neighbour] if call == 2 else [])),
                         proc=proc, pid=100)
    watch.begin()
    watch.trial_ended(0)  # the neighbour listed at the look after trial 0
    watch.trial_ended(1)  # ... and seen in trial 1, whose window that look opened
    out = watch.summary()
    assert out["others"] is not None and "foreign" not in out, out
    [entry] = out["others"]
    assert entry["trials"] == [0, 1] and entry["pid"] == -1, entry
    assert entry["name"].startswith("1 process(es) outside this container (the driver lists 3")
    assert "counted against the 2 process(es) here" in out["note"]
    quiet = ProcessWatch(InContainer(lambda call: ours), proc=proc, pid=100)
    quiet.begin()
    quiet.trial_ended(0)
    assert quiet.summary()["others"] == [], "no one outside: known, and none"


def test_a_source_without_a_list_says_so() -> None:
    for source, said in ((NullSource("no GPU"), "no GPU"), (ScriptedSource(FakeGpu(), lambda t: t),
                                                            "fake telemetry lists no")):
        watch = ProcessWatch(source)
        watch.begin()
        watch.trial_ended(0)
        out = watch.summary()
        assert out["others"] is None and said in out["note"], out
        assert out["looks"] == 1  # asked once, then never again in that measurement


def test_sysfs_lists_no_process(tmp_path: Path) -> None:
    root = make_sysfs(tmp_path)
    with pytest.raises(ProcessesUnavailable, match="sysfs backend has no process list"):
        SysfsSource(0, root=root).processes()


def _nvml_with(monkeypatch: pytest.MonkeyPatch, compute: list, graphics: object = ()) -> None:
    mod = fake_pynvml()

    def info(pid: int, used: int | None) -> object:
        return type("Info", (), {"pid": pid, "usedGpuMemory": used})()

    def compute_list(h: int) -> list:
        if isinstance(compute, Exception):
            raise compute
        return [info(*c) for c in compute]

    def graphics_list(h: int) -> list:
        if isinstance(graphics, Exception):
            raise graphics
        return [info(*g) for g in graphics]

    mod.nvmlDeviceGetComputeRunningProcesses = compute_list
    mod.nvmlDeviceGetGraphicsRunningProcesses = graphics_list
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_nvml_lists_compute_and_graphics_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    _nvml_with(monkeypatch, [(11, 3 << 30), (12, None)], [(12, 1 << 20), (13, 2 << 20)])
    listed = {p.pid: p for p in NvmlSource(0).processes()}
    assert listed[11] == Listed(11, 3 << 30, "compute")
    assert listed[12] == Listed(12, 1 << 20, "compute+graphics")
    assert listed[13].kind == "graphics" and set(listed) == {11, 12, 13}  # no MPS list here
    _nvml_with(monkeypatch, [(11, None)], NVMLError_NotSupported("Not Supported"))
    source = NvmlSource(0)
    assert [p.pid for p in source.processes()] == [11]  # the graphics list passed over
    _nvml_with(monkeypatch, NVMLError("Insufficient Permissions"))
    with pytest.raises(ProcessesUnavailable, match="Insufficient Permissions"):
        NvmlSource(0).processes()


def test_a_measurement_records_who_else_was_on_the_gpu(monkeypatch: pytest.MonkeyPatch,
                                                       relatives: Relatives) -> None:
    """Through NVML (a fake pynvml): another process appears from the 3rd look on, while the
    kernel is timed; the measurement names it, with the trials it was in, and not this
    process."""
    me = os.getpid()
    mod = fake_pynvml()
    looks = []

    def compute(h: int) -> list:
        looks.append(time.perf_counter())
        pids = [me] + ([relatives.other] if len(looks) >= 3 else [])
        return [type("Info", (), {"pid": p, "usedGpuMemory": 700 << 20})() for p in pids]

    mod.nvmlDeviceGetComputeRunningProcesses = compute
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    gpu = FakeGpu()
    m = measure([FakeKernel(gpu, cycles=1500e6 * 1e-3)], gpu, Plan(**{**FAST, "trials": 5}),
                NvmlSource(0))
    procs = m.gpu_processes
    assert procs["looks"] == 6 and procs["look_s"] > 0  # before the first trial, after each
    (other,) = procs["others"]
    assert (other["pid"], other["name"], other["used_mb"]) == (relatives.other, "sleep", 700.0)
    assert other["trials"] == [1, 2, 3, 4]  # trial 1 ended at the 3rd look
    assert "gpu_processes" in m.as_record()
    assert record_note({"measurement": m.as_record()}) == (
        f"another process (pid {relatives.other}, sleep) used the GPU in trials 2-5")


def test_no_other_process_no_word(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGpu()
    source = Lister(lambda _: [Listed(os.getpid(), 1 << 30)])
    m = measure([FakeKernel(gpu, cycles=1500e6 * 1e-3)], gpu, Plan(**FAST),
                ScriptedSourceWith(gpu, lambda t: t, lister=source))
    assert m.gpu_processes["others"] == [] and source.calls == FAST["trials"] + 1
    rec = {"measurement": m.as_record()}
    assert record_note(rec) == "" and records_note([rec], []) == ""


@dataclass
class ScriptedSourceWith(ScriptedSource):
    lister: Lister | None = None

    def processes(self) -> list[Listed]:
        return self.lister.processes()


def test_amdsmi_lists_processes_and_their_engine_time(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path, relatives: Relatives
                                                      ) -> None:
    """The fake libamd_smi.so lists this process and another; amdsmi's Python layer reads
    the list; the other one's GFX engine time grows by 0.25 s between two looks."""
    amd: FakeState = use_fake_amdsmi(monkeypatch, tmp_path)
    amd.set(nproc=2, proc0_pid=os.getpid(), proc0_vram=2 << 30, proc1_pid=relatives.other,
            proc1_vram=5 << 30, proc1_gfx_ns=1_000_000_000)
    source = AmdSmiSource(0)
    try:
        listed = {p.pid: p for p in source.processes()}
        assert listed[relatives.other] == Listed(relatives.other, 5 << 30, "gpu", 1_000_000_000)
        watch = ProcessWatch(source)
        watch.begin()
        amd.set(proc1_gfx_ns=1_250_000_000)
        watch.trial_ended(0)
        (other,) = watch.summary()["others"]
        assert (other["name"], other["busy_s"], other["used_mb"]) == ("sleep", 0.25, 5120.0)
        amd.set(ns_process=1)
        with pytest.raises(ProcessesUnavailable, match="amdsmi_get_gpu_process_list"):
            source.processes()
    finally:
        source.close()


def test_what_a_record_says_of_other_processes() -> None:
    rec = {"measurement": {"gpu_processes": {"others": [
        {"pid": 1234, "name": "python", "trials": [2, 3, 4]}], "note": ""}}}
    assert record_note(rec) == "another process (pid 1234, python) used the GPU in trials 3-5"
    two = {"measurement": {"gpu_processes": {"others": [
        {"pid": 1, "name": None, "trials": [0]}, {"pid": 2, "name": "x", "trials": [0]}]}}}
    assert record_note(two).startswith("other processes (pid 1, name not readable; pid 2, x)")
    unknown = {"measurement": {"gpu_processes": {"others": None, "note": "the sysfs backend"}}}
    assert record_note(unknown) == "other processes on the GPU not known: the sysfs backend"
    assert record_note({"measurement": {}}) == ""  # a record of before
    assert records_note([{}], [rec, {}]) == (
        "; another process (pid 1234, python) used the GPU in 1 of 2 runs after the step")
    assert records_note([rec], []) == (
        "; another process (pid 1234, python) used the GPU in the run before the step")
    assert spans([5, 1, 3, 4, 9, 10]) == "1, 3-5, 9-10"


def test_what_a_look_costs_on_the_fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host time of a look, measured as the GPU step measures it on NVML
    (tools/lab/experiments/gpu_neighbour.py); the fake's figure is Python's and /proc's."""
    _nvml_with(monkeypatch, [(os.getpid(), 1 << 30), (1, 1 << 20)])
    cost = time_looks(NvmlSource(0), count=50)
    assert cost["count"] == 50 and 0 < cost["list_median_s"] <= cost["look_max_s"]
    assert cost["summary"]["looks"] == 50
