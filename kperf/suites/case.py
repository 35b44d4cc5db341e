"""Time one case: the one path by which every tool measures a kernel.

asv's timed suites (``_suites._TimeSuite``), the PR gate (``kperf.gate``, a worker per
side) and ``kperf perf`` (kperf/history/perf.py), each through a measurement worker
(kperf/core/worker.py), all prepare, check and time a case here, so they measure it the
same way. This module is the glue between the measurement core (kperf/core, which
never imports kernels) and the code under test (``kernels``, imported lazily from
whatever ``sys.path`` finds: the package asv installed for the commit, or a gate side).

A case is a ``kperf.specs.CaseSpec``; ``handle`` answers requests (``kperf.specs.Request``:
prepare, measure, static, compile, warm).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import random
import statistics
import sys
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from kperf.core import timing
from kperf.core.device import open_device
from kperf.core.prepare import Prepared, calls_over, case_what, prepare, span_bytes
from kperf.core.telemetry import Source, open_source
from kperf.core.worker import WorkerClient, WorkerSpec, device_key
from kperf.specs import CaseSpec, Request

from .inputs import InputSets, SharedInputs
from .static import codegen_request

# Inputs of prepared cases a worker keeps on the GPU, least recently used dropped first.
CACHE_BYTES = int(float(os.environ.get("KPERF_WORKER_CACHE_GB", "16")) * 2**30)
# Pads in front of placed copies (plan key placements): up to this many 2 MiB pages.
PAD_PAGES = 64
PAGE_BYTES = 2**21
# A cold TileLang compile of the largest kernel took ~20 s on the CPU machine
# (docs/journal/2026-12-01.md).
PREPARE_TIMEOUT_S = 600.0
# Backends whose build is the compile (TileLang: nvcc, 4.7-7.3 s a kernel to first result on
# the H200 machine, 2026-12-01, docs/journal/2026-12-01.md); a Triton kernel compiles at its first
# launch.
COMPILE_AHEAD_BACKENDS = ("tilelang",)
# Processes that compile a cold op's other kernels at once: each imports torch and the
# compiler (~1.5 GB of host memory), and the host keeps cores for the worker and asv.
COMPILE_AHEAD_PROCESSES = min(8, max(1, (os.cpu_count() or 1) - 2))
MEASURE_TIMEOUT_S = 300.0  # warm-up is capped at 5 s (timing.Plan); the trials take ~1 s


def _span(tensor: Any) -> int:
    """Bytes a contiguous tensor takes in an arena slot: its own, rounded up to 4 KiB."""
    return span_bytes(tensor.numel() * tensor.element_size())


def case_key(spec: CaseSpec) -> str:
    return json.dumps({k: spec.get(k) for k in ("op", "case", "dtype", "backend", "overrides")},
                      sort_keys=True)


def derived(prepared: Prepared, m: timing.Measurement) -> dict[str, Any]:
    """What a measurement means for this case: roofline figures, the chosen config."""
    median = statistics.median(m.samples)
    return {"median_s": median, "tflops": prepared.flops / median / 1e12,
            "gbps": prepared.bytes_moved / median / 1e9, "config": prepared.config,
            "first_call_s": prepared.first_call_s,
            "max_abs_err": prepared.agreement.max_abs_err,
            "energy_per_call_j": m.energy_per_call_j}


class CaseRunner:
    """Prepared cases and the GPU's device and telemetry, kept between requests."""

    def __init__(self, device_index: int = 0) -> None:
        self.device_index = device_index
        self.builds: dict[Any, tuple[Any, float]] = {}
        self.input_sets = InputSets()
        self.compiled_ahead: set[tuple[str, str]] = set()
        self.measured_until: float | None = None  # monotonic end of the last measurement
        self.prepared: OrderedDict[str, Prepared] = OrderedDict()
        self.input_bytes: dict[str, float] = {}
        self.last: dict[str, dict[str, Any]] = {}  # the latest measurement of each case
        self.compiles: dict[str, str] = {}  # how each case's kernel came to be
        self._device: Any = None
        self._source: Source | None = None
        self._target: Any = None
        self._placed: list[Any] = []  # placed copies and pads of the measurement under way
        self._arena: Any = None  # device memory placed copies are drawn from (placed_in_arena)

    @property
    def on_host(self) -> bool:
        """``KPERF_DEVICE=cpu``: kernels run on the CPU (Triton's interpreter), configured
        for ``KPERF_TARGET`` (default sm_90a). Only tests use this."""
        return os.environ.get("KPERF_DEVICE", "gpu") == "cpu"

    def target(self) -> Any:
        if self._target is None:
            from kperf.ops.targets import current_device_target, get_target

            self._target = (get_target(os.environ.get("KPERF_TARGET", "sm_90a"))
                            if self.on_host else current_device_target())
        return self._target

    def device(self) -> Any:
        if self._device is None:
            self._device = open_device(2 * self.target().l2_bytes, self.device_index)
        return self._device

    def source(self) -> Source:
        if self._source is None:
            self._source = open_source(device_index=self.device_index)
        return self._source

    def prepare(self, spec: CaseSpec,
                batch: list[dict[str, Any]] | None = None) -> Prepared:
        """Build, check and keep one case. ``batch``: the cases the run will ask for next
        (asv's selection of this suite, a gate side's cases); when this case's build missed
        the compile cache, the batch's other kernels of its backend are compiled ahead, in
        parallel."""
        key = case_key(spec)
        if key in self.prepared:
            self.prepared.move_to_end(key)
            self.compiles[key] = "prepared before"  # its compile was told the first time
            return self.prepared[key]
        op = SharedInputs(case_op(spec["op"]), self.input_sets)
        self.device()  # a missing GPU fails here, before any compile
        built_before, files_before = len(self.builds), cache_files()
        prepared = prepare(op, spec["case"], spec["dtype"], spec["backend"], self.target(),
                           device="cpu" if self.on_host else "cuda",
                           overrides=spec.get("overrides"), builds=self.builds)
        new_files = cache_files() - files_before
        self.compiles[key] = compile_note(len(self.builds) > built_before, new_files,
                                          prepared.first_call_s)
        if new_files and batch:
            self.compiles[key] += compile_ahead(spec, batch, {build[0] for build in self.builds},
                                                self.compiled_ahead)
        self.prepared[key] = prepared
        self.input_bytes[key] = prepared.bytes_moved * len(prepared.calls)
        self._evict()
        return prepared

    def awaits(self, spec: CaseSpec, consumer: str | None) -> dict[str, Any] | None:
        """The measurement this consumer has not read yet (asv's energy benchmark of a
        case measured it; its time benchmark comes next): the case needs no preparing
        for it, and one its inputs were dropped for would be made again for nothing."""
        last = self.last.get(case_key(spec))
        if consumer is None or last is None or consumer in last["consumers"]:
            return None
        return last["result"]

    def _evict(self) -> None:
        while len(self.prepared) > 1 and sum(
                self.input_bytes[k] for k in self.prepared) > CACHE_BYTES:
            oldest, _ = self.prepared.popitem(last=False)
            self.input_bytes.pop(oldest, None)

    def measure(self, spec: CaseSpec, plan: dict[str, Any]) -> dict[str, Any]:
        return self.measure_prepared(self.prepare(spec), plan)

    def measure_prepared(self, prepared: Prepared, plan: dict[str, Any]) -> dict[str, Any]:
        plan = dict(plan)
        placements = plan.pop("placements", 0)
        if not isinstance(placements, int) or placements < 0:
            raise ValueError(f"plan 'placements' must be an integer >= 0, got {placements!r}")
        arena_gb = plan.pop("placement_arena_gb", 0)
        if not isinstance(arena_gb, int | float) or arena_gb < 0:
            raise ValueError(f"plan 'placement_arena_gb' must be a number >= 0, got {arena_gb!r}")
        outputs = plan.pop("placed_outputs", False)
        if not isinstance(outputs, bool) or (outputs and not arena_gb):
            raise ValueError(f"plan 'placed_outputs' must be true or false, and true only with "
                             f"'placement_arena_gb', got {outputs!r}")
        if placements and prepared.fn is not None and prepared.inputs:
            prepared = (self.placed_in_arena(prepared, placements, int(arena_gb * 2**30),
                                             outputs)
                        if arena_gb else self.placed(prepared, placements))
        # How long the GPU had been idle (as far as this worker knows) when the warm-up
        # began: with the warm-up trace, what a case's settling depends on
        idle_before_s = (time.monotonic() - self.measured_until
                         if self.measured_until is not None else None)
        try:
            m = timing.measure(prepared.calls, self.device(),
                               timing.Plan().with_overrides(**plan), self.source())
        finally:
            self.measured_until = time.monotonic()
            self.release_placed()
        return {"measurement": m.as_record(), "samples": m.samples, "number": m.number,
                "target": self.target().name, "gpu": self.device().name,
                "measured_at": time.time(), "pid": os.getpid(),
                "idle_before_s": idle_before_s, **derived(prepared, m)}

    def placed(self, prepared: Prepared, placements: int) -> Prepared:
        """The case with its inputs copied to ``placements`` new places in device memory,
        each behind a pad of random size, its calls cycling over all copies, and the L2
        flush buffer moved too (plan key ``placements``). Where a worker's buffers lie
        sets its offset on bandwidth-bound kernels: docs/journal/2026-12-01.md, "Where a worker's
        offset comes from". The copies live for one measurement (``release_placed``)."""
        import torch

        device = next(t.device for t in prepared.inputs[0] if isinstance(t, torch.Tensor))
        self.device().move_flush(random.randrange(1, PAD_PAGES + 1) * PAGE_BYTES)
        copies = []
        for _ in range(placements):
            self._placed.append(torch.empty(random.randrange(1, PAD_PAGES + 1) * PAGE_BYTES,
                                            dtype=torch.uint8, device=device))
            copies += [tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in inputs)
                       for inputs in prepared.inputs]
        self._placed += copies
        return dataclasses.replace(prepared, calls=calls_over(prepared.fn, copies))

    def placed_in_arena(self, prepared: Prepared, placements: int, arena_bytes: int,
                        outputs: bool = False) -> Prepared:
        """The case with its inputs copied to ``placements`` slots drawn at random from an
        arena of ``arena_bytes`` this worker keeps (plan key ``placement_arena_gb``), its
        calls cycling over the copies, the L2 flush buffer moved too. Copies made by
        ``placed`` come from the pages this process freed a block before, so a worker's
        share of slow places is its own for its life (a decode GEMM: 3/4, 3/4, 16/16 and
        13/16 of its copies slow in every round, docs/journal/2026-12-03.md "Night of
        2026-12-03"); slots of one large arena are a new draw every block. An arena too
        small for ``placements`` copies holds as many as fit (at least one). ``outputs``
        (plan key ``placed_outputs``): each copy's call allocates in its own slot too
        (kperf/core/outputs.py)."""
        import torch

        from kperf.core.outputs import output_bytes, served_from

        sets = [[t for t in inputs if isinstance(t, torch.Tensor)] for inputs in prepared.inputs]
        if any(not t.is_contiguous() for ts in sets for t in ts):
            return self.placed(prepared, placements)  # a strided view cannot be re-laid
        device = sets[0][0].device
        out_bytes = output_bytes(prepared.fn, prepared.inputs[0], device) if outputs else 0
        slot_bytes = -(-(sum(_span(t) for ts in sets for t in ts) + out_bytes * len(sets))
                       // PAGE_BYTES) * PAGE_BYTES
        want = max(arena_bytes, slot_bytes)
        if self._arena is None or self._arena.numel() != want:
            self._arena = None  # its memory back before the new one is taken
            self._arena = torch.empty(want, dtype=torch.uint8, device=device)
        slots = random.sample(range(self._arena.numel() // slot_bytes),
                              min(placements, self._arena.numel() // slot_bytes))
        self.device().move_flush(random.randrange(1, PAD_PAGES + 1) * PAGE_BYTES)
        copies, regions = [], []
        for slot in slots:
            offset = slot * slot_bytes
            for inputs in prepared.inputs:
                copy = []
                for t in inputs:
                    if not isinstance(t, torch.Tensor):
                        copy.append(t)
                        continue
                    nbytes = t.numel() * t.element_size()
                    view = self._arena.narrow(0, offset, nbytes).view(t.dtype).view(t.shape)
                    copy.append(view.copy_(t))
                    offset += _span(t)
                copies.append(tuple(copy))
                if out_bytes:
                    regions.append(self._arena.narrow(0, offset, out_bytes))
                    offset += out_bytes
        self._placed += copies
        calls = ([served_from(prepared.fn, copy, region)
                  for copy, region in zip(copies, regions, strict=True)]
                 if out_bytes else calls_over(prepared.fn, copies))
        return dataclasses.replace(prepared, calls=calls)

    def release_placed(self) -> None:
        """The placed copies and pads back to the driver, not to torch's cache: the next
        placement then draws pages afresh."""
        if not self._placed:
            return
        self._placed = []
        if not self.on_host:
            import torch

            torch.cuda.empty_cache()

    def measure_for(self, spec: CaseSpec, plan: dict[str, Any],
                    consumer: str) -> dict[str, Any]:
        """One measurement serves each consumer once (asv's time and energy benchmarks of
        a case read the same measurement); a consumer that already had it gets a new one."""
        key = case_key(spec)
        last = self.last.get(key)
        if last is not None and consumer not in last["consumers"]:
            last["consumers"].add(consumer)
            return {**last["result"], "fresh": False}
        result = self.measure(spec, plan)
        self.last[key] = {"result": result, "consumers": {consumer}}
        return {**result, "fresh": True}


def compile_ahead(spec: CaseSpec, batch: list[CaseSpec], built: set[str],
                  done: set[tuple[str, str]]) -> str:
    """Compile, in ``COMPILE_AHEAD_PROCESSES`` processes, the kernels of ``batch`` with
    ``spec``'s backend that this worker has not ``built`` (``case_what`` names): they land
    in the compilers' on-disk caches, so each case's own prepare then loads its kernel.
    Once per op and backend (``done``; an asv suite's batch is one op's, a gate side's
    spans ops); a kernel that fails here fails again in its case's turn."""
    backend = spec["backend"]
    if backend not in COMPILE_AHEAD_BACKENDS or (spec["op"], backend) in done:
        return ""
    done.add((spec["op"], backend))
    todo = [s for s in batch if s["backend"] == backend and not s.get("overrides")
            and case_what(s["op"], s["case"], s["dtype"], s["backend"]) not in built
            and s != spec]
    if len(todo) < 2 or COMPILE_AHEAD_PROCESSES < 2:
        return ""
    from kperf.core.pool import run_many

    start = time.perf_counter()  # host timer on purpose: compiling is host work
    answers = run_many("kperf.suites.case:build_only", todo, COMPILE_AHEAD_PROCESSES,
                       sys.path, str(Path(__file__).with_name("__init__.py")),
                       PREPARE_TIMEOUT_S)
    failed = sum(not a["ok"] for a in answers)
    return (f"; {len(todo) - failed} more {backend} kernels compiled ahead in "
            f"{min(COMPILE_AHEAD_PROCESSES, len(todo))} processes in "
            f"{time.perf_counter() - start:.1f} s"
            + (f" ({failed} failed there: each is tried again in its turn)"
               if failed else ""))


def build_only(spec: CaseSpec) -> dict[str, Any]:
    """Compile one case's kernel and nothing else (a ``kperf.core.pool`` handler): no inputs,
    no launch. Its on-disk cache entry is what the measurement worker then loads."""
    op = case_op(spec["op"])
    case = op.case(spec["case"])
    start = time.perf_counter()  # host timer on purpose: compiling is host work
    built = op.backend(spec["backend"], case.name).build(
        case, spec["dtype"], runner().target(), **(spec.get("overrides") or {}))
    return {"seconds": time.perf_counter() - start, "config": dict(built.config)}


CACHE_VARIABLES = ("TRITON_CACHE_DIR", "TILELANG_CACHE_DIR")


def cache_files() -> int:
    """Files in the compilers' on-disk caches: a build that adds none was a cache hit."""
    return sum(sum(1 for p in Path(os.environ[v]).rglob("*") if p.is_file())
               for v in CACHE_VARIABLES if os.environ.get(v) and Path(os.environ[v]).is_dir())


def compile_note(built: bool, new_files: int, first_call_s: float) -> str:
    """How a case's kernel came to be, for the run's log: the caches are keyed by kernel
    source, so a commit that leaves an op alone should show only cache hits for it."""
    if not built:
        return "already built in this worker"
    if new_files:
        return f"compiled ({new_files} new cache files, {first_call_s:.2f} s to first result)"
    return f"from the compile cache ({first_call_s:.2f} s to first result)"


class _HostOp:
    """An op whose small CPU test cases (``OpDef.test_cases``) can be named like its cases."""

    def __init__(self, op: Any) -> None:
        self._op = op

    def __getattr__(self, name: str) -> Any:
        return getattr(self._op, name)

    def case(self, name: str) -> Any:
        for case in self._op.test_cases:
            if case.name == name:
                return case
        return self._op.case(name)


def case_op(name: str) -> Any:
    """The op ``name``; with ``KPERF_DEVICE=cpu`` it also names its small test cases."""
    from kperf.ops.registry import get_op

    op = get_op(name)
    return _HostOp(op) if os.environ.get("KPERF_DEVICE", "gpu") == "cpu" else op


def warm(specs: list[CaseSpec]) -> dict[str, Any]:
    """Import what these cases will need (torch, their ops, their compilers) without
    touching the GPU: a worker started ahead of its turn (the gate's next pair) does this
    while another process measures, so its GPU context is made only when its turn comes.
    A compiler that cannot be imported is left for ``prepare`` to report, per case."""
    start = time.perf_counter()
    import torch  # noqa: F401

    missing = []
    for name in sorted({spec["op"] for spec in specs}):
        case_op(name)
    for backend in sorted({spec["backend"] for spec in specs} & {"tilelang", "triton"}):
        try:
            importlib.import_module(backend)
        except ImportError as err:
            missing.append(f"{backend}: {err}")
    return {"seconds": time.perf_counter() - start, "missing": missing}


_RUNNER: CaseRunner | None = None


def runner() -> CaseRunner:
    global _RUNNER
    if _RUNNER is None:
        _RUNNER = CaseRunner()
    return _RUNNER


def handle(request: Request) -> Any:
    """A measurement worker's handler (kperf/core/worker.py)."""
    kind, spec = request["op"], request.get("spec", {})
    if kind == "prepare":
        start = time.perf_counter()  # host timer on purpose: preparing is host work
        measured = runner().awaits(spec, request.get("consumer"))
        if measured is not None:
            return {"config": measured["config"], "first_call_s": measured["first_call_s"],
                    "max_abs_err": measured["max_abs_err"], "compile": "measured before",
                    "wall_s": time.perf_counter() - start}
        p = runner().prepare(spec, request.get("batch"))
        return {"config": p.config, "first_call_s": p.first_call_s,
                "max_abs_err": p.agreement.max_abs_err,
                "compile": runner().compiles[case_key(spec)],
                "wall_s": time.perf_counter() - start}
    if kind == "measure":
        plan = request.get("plan") or {}
        consumer = request.get("consumer")
        if consumer:
            return runner().measure_for(spec, plan, consumer)
        return runner().measure(spec, plan)
    if kind == "warm":
        return warm(request.get("specs", []))
    if kind in ("static", "compile"):
        return codegen_request(request)
    raise ValueError(f"unknown request {kind!r}")


def worker_client() -> WorkerClient:
    """The measurement worker for this benchmark process: this commit's environment (its
    ``sys.path``), this GPU, the working tree's suite."""
    from kperf import project

    label = f"{os.environ.get('ASV_COMMIT', '')[:8]} {os.environ.get('ASV_ENV_NAME', '')}"
    return WorkerClient(WorkerSpec(
        handler="kperf.suites.case:handle", sys_path=tuple(sys.path),
        packages=tuple(project.find().code_packages()), device=device_key(dict(os.environ)),
        label=label.strip()))
