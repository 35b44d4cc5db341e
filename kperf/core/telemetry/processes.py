"""Other processes on the GPU: who else held it while a kernel was timed.

A telemetry source that can list the GPU's processes is asked at the start of a
measurement's first trial and at the end of each trial (``ProcessWatch``, called by
kperf/core/timing.py between trials, outside the timed windows):

- NVML: ``nvmlDeviceGetComputeRunningProcesses``, ``...GraphicsRunningProcesses`` and
  ``...MPSComputeRunningProcesses`` (pid and the GPU memory each holds);
- amdsmi: ``amdsmi_get_gpu_process_list`` (pid, VRAM, and the process's GFX engine time so
  far, whose growth over the block says whether it ran work);
- the sysfs backend lists none (amdgpu's sysfs files have no per-process table), and says so.

A listed process holds a context on the GPU; a listing does not say whether it ran work
in that window (amdsmi's engine time does). What a measurement records
(``Measurement.gpu_processes``) is every OTHER process seen in a trial window: its pid,
its name (``/proc/<pid>/comm``), its memory, the trials it was seen in. Left out: this
process, the process that started it, and the measurement workers that process started
(``kperf.core.workerproc``): the gate's other side of the pair, its next pair, its static
workers; in the history, the process that started a worker is asv's benchmark process.

Pids of another pid namespace: in a container the driver lists the host's pids. When the
list holds processes but not this one (which holds a context while it measures), its pids
are not this namespace's: they are kept as listed, unnamed, ``others`` is None (unknown:
this run's own cannot be told from others') and the note says so. An empty list (the
driver hides processes, or wants rights the process lacks) is unknown too, never "none".
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WORKER_MODULE = "kperf.core.workerproc"  # how kperf/core/worker.py starts a measurement worker


class ProcessesUnavailable(RuntimeError):
    """The source cannot list the GPU's processes (the message says why)."""


@dataclass(frozen=True)
class Listed:
    """One process as the driver lists it on this GPU."""

    pid: int
    used_bytes: int | None = None  # GPU memory it holds (None: not reported)
    kind: str = "compute"  # NVML: compute | graphics | mps (joined by "+"); amdsmi: gpu
    busy_ns: int | None = None  # amdsmi: its GFX engine time so far


def listed_processes(source: Any) -> list[Listed]:
    """The source's process list; ``ProcessesUnavailable`` where it has none."""
    lister = getattr(source, "processes", None)
    if lister is None:
        backend = getattr(source, "backend", "?")
        why = getattr(source, "reason", "") if backend == "none" else ""
        raise ProcessesUnavailable(f"the {backend} telemetry lists no processes"
                                   + (f" ({why})" if why else ""))
    return lister()


def merge(listed: Iterable[Listed]) -> list[Listed]:
    """One entry a pid: a process in several of NVML's lists has its kinds joined."""
    by_pid: dict[int, Listed] = {}
    for item in listed:
        seen = by_pid.get(item.pid)
        if seen is None:
            by_pid[item.pid] = item
            continue
        used = [u for u in (seen.used_bytes, item.used_bytes) if u is not None]
        kinds = seen.kind if item.kind in seen.kind.split("+") else f"{seen.kind}+{item.kind}"
        by_pid[item.pid] = Listed(item.pid, max(used) if used else None, kinds,
                                  seen.busy_ns if seen.busy_ns is not None else item.busy_ns)
    return list(by_pid.values())


class ProcFs:
    """What ``/proc`` (or a fake tree: ``root``) says of a pid; None where it cannot be read."""

    def __init__(self, root: str | os.PathLike[str] = "/proc") -> None:
        self.root = Path(root)

    def _read(self, pid: int, name: str) -> bytes | None:
        try:
            return (self.root / str(pid) / name).read_bytes()
        except OSError:
            return None

    def comm(self, pid: int) -> str | None:
        raw = self._read(pid, "comm")
        text = raw.decode(errors="replace").strip() if raw is not None else ""
        return text or None

    def ppid(self, pid: int) -> int | None:
        """The parent's pid: the 2nd field after the command, which may hold ')' itself."""
        raw = self._read(pid, "stat")
        fields = raw[raw.rfind(b")") + 1:].split() if raw else []
        return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None

    def cmdline(self, pid: int) -> list[str]:
        raw = self._read(pid, "cmdline") or b""
        return [a.decode(errors="replace") for a in raw.split(b"\0") if a]

    def gpu_holders(self, node: str) -> int | None:
        """How many processes here hold a GPU context on the device ``node``
        (``/dev/nvidia0``): an open descriptor of it and the CUDA driver mapped (NVML alone
        opens the node too, without a context); None where ``/proc`` cannot be listed."""
        try:
            pids = [int(p.name) for p in self.root.iterdir() if p.name.isdigit()]
        except OSError:
            return None
        count = 0
        for pid in pids:
            fds = self.root / str(pid) / "fd"
            try:
                opened = any(os.readlink(fd) == node for fd in fds.iterdir())
            except OSError:
                continue
            if opened and b"libcuda.so" in (self._read(pid, "maps") or b""):
                count += 1
        return count


def is_worker(cmdline: Sequence[str]) -> bool:
    """A measurement worker: ``python -m kperf.core.workerproc ...``."""
    return any(a == "-m" and b == WORKER_MODULE for a, b in itertools.pairwise(cmdline))


class Own:
    """Which pids are this run's own: this process, the process that started it (the
    gate; asv's benchmark process), and the measurement workers that process started (the
    gate's other side). An orphan (its parent pid 1 or 0) has no such relatives."""

    def __init__(self, proc: ProcFs, pid: int | None = None) -> None:
        self.proc = proc
        self.pid = os.getpid() if pid is None else pid
        self.parent = proc.ppid(self.pid)
        self._known: dict[int, bool] = {}

    def __contains__(self, pid: object) -> bool:
        if not isinstance(pid, int):
            return False
        if pid not in self._known:
            self._known[pid] = self._decide(pid)
        return self._known[pid]

    def _decide(self, pid: int) -> bool:
        if pid == self.pid:
            return True
        if not self.parent or self.parent <= 1:
            return False
        return pid == self.parent or (self.proc.ppid(pid) == self.parent
                                      and is_worker(self.proc.cmdline(pid)))


# the pid of the entry that stands for processes counted, not named (another namespace)
COUNTED = -1
COUNTED_NOTE = ("the driver's pids are of another pid namespace (a container): the {n} it "
                "lists were counted against the {here} process(es) here holding {node}")
FOREIGN_NOTE = ("the driver lists {n} process(es) on this GPU but not this one ({pid} here), "
                "which holds a context while it measures: its pids are of another pid "
                "namespace (a container?), so they are not named and this run's own cannot "
                "be told from others'")
EMPTY_NOTE = ("the driver lists no process on this GPU, not even this one: other processes "
              "cannot be seen here (another pid namespace, or rights this process lacks)")


class ProcessWatch:
    """The other processes on the GPU over a measurement's trials. ``begin`` looks before
    the first trial; ``trial_ended(i)`` looks after trial ``i`` and marks what either look
    around it saw as seen in that trial."""

    def __init__(self, source: Any, proc: ProcFs | None = None, pid: int | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.source, self.proc, self.clock = source, proc or ProcFs(), clock
        self.own = Own(self.proc, pid)
        self.others: dict[int, dict[str, Any]] = {}  # pid -> its entry (see ``summary``)
        self.foreign: dict[int, dict[str, Any]] = {}  # pids of another namespace, as listed
        self.first_busy: dict[int, int] = {}  # pid -> its engine time at its first look
        self.notes: list[str] = []
        self.looks = self.failed = 0
        self.look_s = 0.0
        self.unavailable = False
        self.last: set[int] = set()  # other pids the latest look saw

    def begin(self) -> None:
        self.last = self.look()

    def trial_ended(self, index: int) -> None:
        now = self.look()
        for pid in sorted(self.last | now):
            trials = self.others[pid]["trials"]
            if index not in trials:
                trials.append(index)
        self.last = now

    def look(self) -> set[int]:
        """The other pids on the GPU now (empty where they cannot be known)."""
        if self.unavailable:
            return set()
        start = self.clock()
        try:
            listed = merge(listed_processes(self.source))
        except ProcessesUnavailable as err:
            self.unavailable = True
            self._note(str(err))
            return set()
        except Exception as err:  # a failing look is counted, never raised into the timing
            self.failed += 1
            self._note(f"a look failed: {type(err).__name__}: {err}")
            return set()
        finally:
            self.looks += 1
            self.look_s += self.clock() - start
        return self._sort(listed)

    def _sort(self, listed: list[Listed]) -> set[int]:
        if not listed:
            self._note(EMPTY_NOTE)
            return set()
        if all(item.pid != self.own.pid for item in listed):
            counted = self._count_foreign(listed)
            if counted is not None:
                return counted
            self._note(FOREIGN_NOTE.format(n=len(listed), pid=self.own.pid))
            for item in listed:
                self.foreign.setdefault(item.pid, {"pid": item.pid, "kind": item.kind,
                                                   "used_mb": _mb(item.used_bytes)})
            return set()
        others = set()
        for item in listed:
            if item.pid in self.own:
                continue
            others.add(item.pid)
            entry = self.others.get(item.pid)
            if entry is None:  # /proc read once a pid and measurement
                entry = self.others[item.pid] = {
                    "pid": item.pid, "name": self.proc.comm(item.pid), "kind": item.kind,
                    "used_mb": None, "busy_s": None, "trials": []}
            used = _mb(item.used_bytes)
            if used is not None and (entry["used_mb"] is None or used > entry["used_mb"]):
                entry["used_mb"] = used
            if item.busy_ns is not None:
                first = self.first_busy.setdefault(item.pid, item.busy_ns)
                entry["busy_s"] = max(0, item.busy_ns - first) / 1e9
        return others

    def _count_foreign(self, listed: list[Listed]) -> set[int] | None:
        """In a container the driver's pids are the host's, so none can be named; but every
        process of this pid namespace that holds a context on the GPU is this run's (or
        the container's), so the driver listing more than that is another process outside
        it. {COUNTED} then stands for them; None where the count cannot be made."""
        node = getattr(self.source, "device_node", None)
        path = node() if callable(node) else None
        here = self.proc.gpu_holders(path) if path else None
        if not here:  # this process holds a context while it measures: 0 is no answer
            return None
        self._note(COUNTED_NOTE.format(n=len(listed), here=here, node=path))
        extra = len(listed) - here
        if extra <= 0:
            return set()
        entry = self.others.setdefault(COUNTED, {
            "pid": COUNTED, "name": None, "kind": "compute", "used_mb": None, "busy_s": None,
            "trials": []})
        entry["name"] = (f"{extra} process(es) outside this container (the driver lists "
                         f"{len(listed)}, pids {', '.join(str(i.pid) for i in listed)}; "
                         f"{here} here)")
        return {COUNTED}

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def summary(self) -> dict[str, Any]:
        """``Measurement.gpu_processes``: ``others`` (each other process seen in a trial:
        pid, name (None: not readable), kind, used_mb, busy_s (amdsmi: its engine time over
        the looks; else None), trials (indices)), None where they could not be known;
        ``note`` why not, or what was left out; ``looks`` and ``look_s`` (the mean host
        seconds of a look); ``foreign``: the pids of another namespace, as listed."""
        known = self.looks > self.failed and not self.unavailable and not self.foreign \
            and EMPTY_NOTE not in self.notes
        seen = [e for _, e in sorted(self.others.items()) if e["trials"]]
        out: dict[str, Any] = {
            "others": seen if known else None,
            "note": "; ".join(self.notes) or "this process and its sibling workers left out",
            "looks": self.looks,
            "look_s": self.look_s / self.looks if self.looks else None,
        }
        if self.foreign:
            out["foreign"] = [e for _, e in sorted(self.foreign.items())]
        if self.failed:
            out["failed_looks"] = self.failed
        return out


def _mb(used_bytes: int | None) -> float | None:
    return round(used_bytes / 2**20, 1) if used_bytes is not None else None


# --------------------------------------------------------------------------- wording


def named(entry: dict[str, Any]) -> str:
    """``pid 1234, python``; ``pid 1234, name not readable`` where /proc did not say; the
    count of processes outside a container as it stands."""
    if entry.get("pid") == COUNTED:
        return str(entry.get("name"))
    name = entry.get("name") or "name not readable"
    return f"pid {entry.get('pid')}, {name}"


def spans(numbers: Iterable[int]) -> str:
    """``1, 3-5``: sorted numbers with their runs joined."""
    runs: list[list[int]] = []
    for n in sorted(set(numbers)):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def who(entries: Sequence[dict[str, Any]]) -> str:
    """``another process (pid 1234, python)`` or ``other processes (pid 1, a; pid 2, b)``."""
    names = "; ".join(named(e) for e in entries)
    return f"another process ({names})" if len(entries) == 1 else f"other processes ({names})"


def record_others(rec: dict[str, Any]) -> list[dict[str, Any]]:
    """The other processes a record (kperf/core/record.py) saw on its GPU ([] for none or not
    known: records before 2026-12-06 do not say)."""
    seen = ((rec.get("measurement") or {}).get("gpu_processes") or {}).get("others")
    return [e for e in seen or [] if isinstance(e, dict) and isinstance(e.get("pid"), int)]


def records_note(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> str:
    """For a history step's cause (kperf/site/steps.py): ``; another process (pid 1234,
    python) used the GPU in the run after the step`` where a record of either side saw
    one; '' where none did."""
    parts = []
    for label, recs in (("before", before), ("after", after)):
        hit = [r for r in recs if record_others(r)]
        if not hit:
            continue
        entries = {e["pid"]: e for r in hit for e in record_others(r)}
        runs = "the run" if len(recs) == 1 else f"{len(hit)} of {len(recs)} runs"
        parts.append(f"{who(list(entries.values()))} used the GPU in {runs} {label} the step")
    return "".join(f"; {p}" for p in parts)


def record_note(rec: dict[str, Any]) -> str:
    """For a record's row on the telemetry page: ``another process (pid 1234, python) used
    the GPU in trials 1-5``, or why they could not be seen; '' where none was seen or the
    record does not say."""
    procs = (rec.get("measurement") or {}).get("gpu_processes")
    if not isinstance(procs, dict):
        return ""
    others = record_others(rec)
    if others:
        trials = {t + 1 for e in others for t in e.get("trials") or [] if isinstance(t, int)}
        return f"{who(others)} used the GPU" + (f" in trials {spans(trials)}" if trials else "")
    if procs.get("others") is None:
        return f"other processes on the GPU not known: {procs.get('note', '')}".rstrip(": ")
    return ""
