"""Another process on the gate's GPU (issue 45, item 6): the parts of
tools/lab/experiments/gpu_neighbour.sh.

    python3 tools/lab/experiments/gpu_neighbour.py neighbour DIR   # bursts until killed
    python3 tools/lab/experiments/gpu_neighbour.py cost OUT.json   # what NVML's list costs
    python3 tools/lab/experiments/gpu_neighbour.py check WITH_DIR WITHOUT_DIR OUT.json

``neighbour``: a process that holds a CUDA context on GPU 0 and runs bursts of 2-4 s of
large matmuls (bf16, 8192 x 8192) with 1-3 s of rest between them, at random, until it is
killed; ``DIR/ready`` appears once its context exists and its first burst ran, and
``DIR/bursts.jsonl`` has each burst's start and end (time.time()).
``cost``: this process takes a CUDA context too (so NVML lists it), then times each of
NVML's process lists and a whole look (``time_looks`` below), and
says what the look saw (whether this process is among the listed pids: the namespace check).
``check``: the done-when of issue 45 from two gate reports (gate.json and gate.md of each
folder): with the neighbour the report names it (pid and name) and has no SLOW or FAST;
without it, no "another process" line. Exit 0 if both hold.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


def neighbour(folder: Path) -> None:
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    rng = random.Random(os.getpid())
    first = True
    with (folder / "bursts.jsonl").open("a") as log:
        while True:
            start, length = time.time(), rng.uniform(2.0, 4.0)
            while time.time() - start < length:
                for _ in range(20):
                    torch.matmul(a, b)
                torch.cuda.synchronize()
            log.write(json.dumps({"pid": os.getpid(), "start": start, "end": time.time()}) + "\n")
            log.flush()
            if first:
                (folder / "ready").write_text(str(os.getpid()))
                first = False
            time.sleep(rng.uniform(1.0, 3.0))


def _times(call: Any, count: int) -> dict[str, Any]:
    out = []
    for _ in range(count):
        start = time.perf_counter()
        try:
            call()
        except Exception as err:
            return {"error": f"{type(err).__name__}: {err}"}
        out.append(time.perf_counter() - start)
    out.sort()
    return {"median_us": 1e6 * statistics.median(out), "p90_us": 1e6 * out[int(0.9 * len(out))],
            "max_us": 1e6 * out[-1], "count": count}


def time_looks(source: Any, count: int = 100) -> dict[str, Any]:
    """What a look costs on ``source``: host seconds of the source's process list alone and
    of a whole look (the list, /proc, the sorting), ``count`` of each (median, max)."""
    from kperf.core.telemetry.processes import ProcessWatch, listed_processes

    def timed(call: Callable[[], Any]) -> list[float]:
        out = []
        for _ in range(count):
            start = time.perf_counter()
            with contextlib.suppress(Exception):
                call()
            out.append(time.perf_counter() - start)
        return out

    watch = ProcessWatch(source)
    lists, looks = timed(lambda: listed_processes(source)), timed(watch.look)
    return {"count": count, "list_median_s": statistics.median(lists), "list_max_s": max(lists),
            "look_median_s": statistics.median(looks), "look_max_s": max(looks),
            "summary": watch.summary()}


def cost(path: Path, count: int = 200) -> None:
    import pynvml
    import torch

    from kperf.core.telemetry.nvml import PROCESS_LISTS, NvmlSource
    from kperf.core.telemetry.processes import ProcFs

    torch.ones(1, device="cuda").sum().item()  # a context: NVML lists this process now
    source = NvmlSource(0)
    h = source._handle
    calls = {}
    for _, name in PROCESS_LISTS:
        if hasattr(pynvml, name):
            call = getattr(pynvml, name)
            calls[name] = _times(lambda call=call: call(h), count)
    since = int((time.time() - 5) * 1e6)
    calls["nvmlDeviceGetProcessUtilization (not used; for a later busy/idle rule)"] = _times(
        lambda: pynvml.nvmlDeviceGetProcessUtilization(h, since), 20)
    looks = time_looks(source, count)
    proc = ProcFs()
    listed = [{"pid": p.pid, "kind": p.kind, "used_mb": (p.used_bytes or 0) / 2**20,
               "comm": proc.comm(p.pid), "ppid": proc.ppid(p.pid)} for p in source.processes()]
    out = {"calls": calls, "look": {k: v for k, v in looks.items() if k != "summary"},
           "look_summary": looks["summary"], "listed": listed, "this_pid": os.getpid(),
           "this_pid_listed": any(p["pid"] == os.getpid() for p in listed)}
    try:
        samples = pynvml.nvmlDeviceGetProcessUtilization(h, since)
        out["utilization"] = [{"pid": s.pid, "sm": s.smUtil, "mem": s.memUtil,
                               "t": s.timeStamp} for s in samples][:50]
    except Exception as err:
        out["utilization"] = f"{type(err).__name__}: {err}"
    path.write_text(json.dumps(out, indent=1))
    print(json.dumps({"calls": calls, "look": out["look"], "listed": listed,
                      "this_pid_listed": out["this_pid_listed"]}, indent=1))


def _report(folder: Path) -> tuple[dict[str, Any], str]:
    gate, md = folder / "gate.json", folder / "gate.md"
    return (json.loads(gate.read_text()) if gate.exists() else {},
            md.read_text() if md.exists() else "")


def check(with_dir: Path, without_dir: Path, path: Path) -> int:
    """The done-when: named, no SLOW or FAST with the neighbour; no such line without."""
    ready = with_dir / "ready"
    pid = int(ready.read_text()) if ready.exists() else None
    shared, md_with = _report(with_dir)
    alone, md_without = _report(without_dir)
    verdicts = {label: [c.get("verdict") for c in rep.get("cases", [])]
                for label, rep in (("with", shared), ("without", alone))}
    named = [c["case"] for c in shared.get("cases", []) if pid is not None and any(
        p.get("pid") == pid for p in c.get("processes") or [])]
    results = {
        "neighbour_pid": pid,
        "with: exit": shared.get("exit_code"), "without: exit": alone.get("exit_code"),
        "with: verdicts": verdicts["with"], "without: verdicts": verdicts["without"],
        "with: cases naming the neighbour in gate.json": named,
        "with: gate.md names it": pid is not None and f"(pid {pid}," in md_with,
        "with: no SLOW or FAST": bool(verdicts["with"]) and not {"SLOW", "FAST"} & set(
            verdicts["with"]),
        "without: no 'another process' line": bool(md_without) and
        "another process" not in md_without and "other processes" not in md_without,
        "without: no SLOW or FAST": bool(verdicts["without"]) and not {"SLOW", "FAST"} & set(
            verdicts["without"]),
    }
    passed = bool(named) and all(results[k] for k in (
        "with: gate.md names it", "with: no SLOW or FAST", "without: no 'another process' line"))
    results["done_when"] = "PASS" if passed else "FAIL"
    lines = [line for line in md_with.splitlines() if "another process" in line][:5]
    results["with: gate.md lines"] = lines
    path.write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))
    return 0 if passed else 1


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "neighbour":
        neighbour(Path(args[0]))
    elif mode == "cost":
        cost(Path(args[0]))
    elif mode == "check":
        sys.exit(check(Path(args[0]), Path(args[1]), Path(args[2])))
    else:
        sys.exit(__doc__)
