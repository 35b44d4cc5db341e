"""The timed suites (time and energy, measured by a worker through ``case``) and the
gate's list of cases (``gate_cases``); the suites that need no GPU are in ``cpu``.

A project's ``benchmarks/bench_<op>.py`` makes them for its op with ``op_suites``
(kperf/suites/__init__.py), names and parameters written out as literals: asv discovers
the suite once, in one commit's environment, so they must not depend on the code under
test. The op's code is imported in ``setup`` from the package asv installed for the commit
being measured. An op, case or backend that does not exist at that commit raises
``NotImplementedError``: asv records a skip, not a failure. Names starting with ``_`` are
invisible to asv's discovery.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kperf.core import METHOD_VERSION, record
from kperf.specs import CaseSpec, GateCase

from .case import MEASURE_TIMEOUT_S, PREPARE_TIMEOUT_S, case_op, worker_client
from .cpu import _bench_name, _Codegen, _CompileTime, _StaticFigure
from .digests import (
    BASELINE_POLICY,
    KERNEL_POLICY,
    baseline_digest,
    kernel_digest,
    timed_elsewhere,
    timing_policy,
)

BENCH_REGEX = "KPERF_BENCH_REGEX"  # asv's -b regexes of the run, a JSON list
# Adaptive trials (kperf/core/trials.py, ``Plan.stop_rel_ci``): a case stops sampling once the
# 95% interval of its median is within this share of its class's smallest reported change
# (thresholds.json ``min_ratio``), e.g. 0.1% for a bandwidth-bound kernel at 0.5%. Then the
# trials' own uncertainty adds little to what moves a case between runs of one commit
# (docs/perf.md, "The history's A/A spread per class"). KPERF_PLAN's ``stop_rel_ci``,
# where given, wins (0: every case takes its ``trials``).
PRECISION_SHARE = 0.2


def case_name(benchmark: str, combo: Sequence[Any]) -> str:
    """``benchmark(param, ...)`` with each parameter's repr: how asv's ``-b`` and the
    gate's rules (thresholds.json) name a case."""
    return f"{benchmark}({', '.join(map(repr, combo))})"


def thresholds_raw(path: Path | None = None) -> dict[str, Any]:
    """The project's thresholds.json as it is (the suites read two things of a class)."""
    from kperf import project

    return json.loads((path or project.find().thresholds).read_text())


# a timed case of an op, as asv names it (kperf/gate/config.py reads names the same way)
TIMED_CASE = re.compile(r"^bench_(?P<op>\w+?)\.\w+\.track_(?:time|energy)\('(?P<case>[^']*)'")


def case_class(name: str, raw: dict[str, Any]) -> dict[str, Any] | None:
    """thresholds.json's class of a case: a rule's that matches its name (the static
    figures', a project's override), else, for a timed case, the class its op declares
    (as this process imports the op: the commit's). None: no op of that name. An op that
    declares no class, or one thresholds.json lacks, is refused with its name."""
    from kperf.ops.op import Unsupported
    from kperf.ops.registry import class_of, get_op

    for rule in raw["rules"]:
        if re.search(rule["match"], name):
            return raw["classes"][rule["class"]]
    timed = TIMED_CASE.match(name)
    if not timed:
        return None
    try:
        declared = class_of(get_op(timed["op"]), timed["case"])
    except Unsupported:
        return None
    if not declared:
        raise ValueError(f"{name}: op {timed['op']!r} declares no class (OpDef klass, or a "
                         f"case's klass: compute, bandwidth, decode, launch; docs/new-op.md)")
    if declared not in raw["classes"]:
        raise ValueError(f"{name}: op {timed['op']!r} declares class {declared!r}, which "
                         f"thresholds.json does not define ({sorted(raw['classes'])})")
    return raw["classes"][declared]


def trial_precision(name: str, thresholds: Path | None = None) -> float:
    """``Plan.stop_rel_ci`` for the case ``name``: PRECISION_SHARE of its class's
    ``min_ratio`` (0, no early stop, for a class without one or a case of no op)."""
    klass = case_class(name, thresholds_raw(thresholds))
    return PRECISION_SHARE * float(klass.get("min_ratio", 0)) if klass else 0.0


def placement_plan(name: str, thresholds: Path | None = None) -> dict[str, Any]:
    """The plan keys that place the case ``name``'s buffers, as the gate places a block of
    its class (kperf/gate/measure.py ``class_placement``), for a class whose level follows
    where its buffers lie (``level_by_placement``); {} for any other class.

    One asv run measures every case in one worker process, whose buffers lie where its
    allocations put them: graph-replayed bandwidth kernels of 7-9 us then read up to
    1.65% apart (sd) between workers, and 16 copies from an arena with placed outputs
    brought that to 0.05% (docs/gate-evidence.md, "The bandwidth class")."""
    raw = thresholds_raw(thresholds)
    klass = case_class(name, raw)
    if not klass or not klass.get("level_by_placement"):
        return {}
    placements = int(klass.get("placements", raw["sequential"].get("placements", 0)))
    arena_gb = float(klass.get("placement_arena_gb", 0)) if placements else 0.0
    hold_s = float(klass.get("rep_hold_min_s", 0))
    return {**({"placements": placements} if placements else {}),
            **({"placement_arena_gb": arena_gb} if arena_gb else {}),
            **({"placed_outputs": True} if arena_gb and klass.get("placed_outputs") else {}),
            **({"rep_hold_min_s": hold_s} if hold_s else {})}


class _CaseSuite:
    """One op x case x dtype x backend on the visible GPU, measured by a worker.

    The benchmark process only names the case: a measurement worker for this commit's
    environment and GPU (``_case.worker_client``) compiles, checks and times it, and keeps
    all of that warm for the next case (docs/journal/2026-12-01.md, "Suite throughput"). A compile
    error, a wrong or NaN result, a crash or a hang of the worker fails this case only.
    """

    op: str = ""
    param_names = ("case", "dtype", "backend")
    timeout = 900
    # asv's version of the suite: the measuring method's. Configuration that is the gate's
    # (thresholds, subsets, a class's placements) does not start a new series; a case's
    # plan is recorded with every result and the site's step lines name a change of it.
    version = METHOD_VERSION
    consumer = "time"  # which reader of a case's one measurement this suite is
    method = "track_time"

    def setup(self, case: str, dtype: str, backend: str) -> None:
        op = case_op(self.op)  # on CPU (tests) also the op's small test cases
        op.backend(backend, op.case(case).name)  # missing here: a skip, before any GPU work
        self.spec = {"op": self.op, "case": case, "dtype": dtype, "backend": backend}
        self.plan = self._plan()
        self.baseline_key = baseline_digest(self.op, self.plan) if backend == op.baseline else None
        every_commit = timing_policy(KERNEL_POLICY) == "every"
        self.kernel_key = (None if every_commit or backend == op.baseline
                           else kernel_digest(self.op, backend, self.plan))
        if self.baseline_key:
            skip_unchanged_baseline(_time_name(type(self)), self.spec, self.baseline_key)
        if self.kernel_key:
            skip_unchanged_kernel(_time_name(type(self)), self.spec, self.kernel_key)
        self.worker = worker_client()
        ready = self.worker.request({"op": "prepare", "spec": self.spec,
                                     "consumer": self.consumer, "batch": self.selected()},
                                    PREPARE_TIMEOUT_S)
        print(f"kperf: {self.op}/{case}/{dtype}/{backend}: {ready['compile']}",
              file=sys.stderr)

    def selected(self) -> list[CaseSpec]:
        """The cases of this suite the run measures: asv's ``-b`` regexes (passed on by
        kperf.history.bench as ``KPERF_BENCH_REGEX``, a JSON list) matched as asv matches them, on
        ``name(param, ...)`` with each parameter's repr."""
        regexes = json.loads(os.environ.get(BENCH_REGEX, "[]"))
        name = _bench_name(self, self.method)
        return [dict(zip(("op", *self.param_names), (self.op, *combo), strict=True))
                for combo in itertools.product(*self.params)
                if not regexes or any(re.search(r, case_name(name, combo)) for r in regexes)]

    def _plan(self) -> dict[str, Any]:
        """KPERF_PLAN, with the case's class's precision (``trial_precision``) and
        placements (``placement_plan``) where it does not name its own."""
        plan = json.loads(os.environ.get("KPERF_PLAN", "{}"))
        name = case_name(_time_name(type(self)), [self.spec[k] for k in self.param_names])
        if "stop_rel_ci" not in plan:
            plan["stop_rel_ci"] = trial_precision(name)
        return {**placement_plan(name), **plan}

    def _measure(self) -> dict[str, Any]:
        result = self.worker.request({"op": "measure", "spec": self.spec, "plan": self.plan,
                                      "consumer": self.consumer}, MEASURE_TIMEOUT_S)
        if result["fresh"]:  # one record per measurement, whichever benchmark reads it first
            params = {k: self.spec[k] for k in self.param_names}
            keys = {"baseline_key": self.baseline_key, "kernel_key": self.kernel_key}
            record.write_record(_time_name(type(self)), params, {
                "kind": "time", "recorded_at": time.time(), "plan": self.plan,
                **{name: key for name, key in keys.items() if key},
                **{k: result[k] for k in RECORD_FIELDS}})
        return result


class _TimeSuite(_CaseSuite):
    """Device-event timing: the samples asv keeps, with a record of their telemetry."""

    def track_time(self, case: str, dtype: str, backend: str) -> dict[str, Any]:
        result = self._measure()
        return {"samples": result["samples"], "number": result["number"]}

    track_time.unit = "seconds"
    # One round: every round of a commit's run is measured by the same worker process, so
    # a second round repeats what the first saw (a process's offset included, which on an
    # H200 on 2026-12-01 reached 2.5% for a bandwidth-bound kernel while its rounds agreed
    # to 0.05%, docs/journal/2026-12-01.md); it doubled the suite's time for no independent
    # replicate.
    track_time.rounds = 1


RECORD_FIELDS = ("measurement", "config", "target", "gpu", "first_call_s", "tflops", "gbps",
                 "max_abs_err", "energy_per_call_j", "pid", "idle_before_s")


def skip_unchanged_baseline(time_name: str, spec: CaseSpec, key: str) -> None:
    """Under the "changed" policy, a skip (``NotImplementedError``) when this machine timed
    this baseline case at another commit with the same ``baseline_digest``."""
    _skip_unchanged(time_name, spec, BASELINE_POLICY, "baseline_key", key,
                    "the baseline is", "same code, measuring code, torch and GPU")


def skip_unchanged_kernel(time_name: str, spec: CaseSpec, key: str) -> None:
    """Under KPERF_KERNELS=changed, a skip (``NotImplementedError``) when this machine timed
    this TileLang or Triton case at another commit with the same ``kernel_digest``."""
    _skip_unchanged(time_name, spec, KERNEL_POLICY, "kernel_key", key, "the kernel is",
                    "same kernel code, compilers, measuring code, stack, plan and GPU")


def _skip_unchanged(time_name: str, spec: CaseSpec, policy: str, key_field: str,
                    key: str, what: str, same: str) -> None:
    where = timed_elsewhere(policy, time_name, {k: spec[k] for k in _CaseSuite.param_names},
                            key_field, key)
    if where:
        raise NotImplementedError(
            f"{spec['op']}/{spec['case']}/{spec['dtype']}/{spec['backend']}: {what} "
            f"unchanged since commit {where} ({same}), timed there on this machine; "
            f"{policy}=every times it at every commit")


def _time_name(suite: type) -> str:
    time_suite = getattr(suite, "time_suite", suite)
    module = time_suite.__module__.split(".", 1)[-1]
    return f"{module}.{time_suite.__name__}.track_time"


class _EnergySuite(_CaseSuite):
    """Joules per call of each timed case, from the same measurement as its time.

    The energy counter (NVML total energy, amdsmi's accumulator) is read around calls run
    back to back after the timed trials. No counter (or no power reading): a skip.
    """

    time_suite: type = _CaseSuite
    consumer = "energy"
    method = "track_energy"

    def setup(self, case: str, dtype: str, backend: str) -> None:
        super().setup(case, dtype, backend)
        self.result = self._measure()
        if self.result["energy_per_call_j"] is None:
            telemetry = self.result["measurement"]
            raise NotImplementedError(
                f"no energy reading on this machine: telemetry {telemetry['telemetry_backend']}"
                f" ({telemetry['telemetry_reason']})")

    def track_energy(self, case: str, dtype: str, backend: str) -> float:
        return self.result["energy_per_call_j"]

    track_energy.unit = "joules"


def energy_suite(time_suite: type) -> type:
    """``<Op>Energy`` for a bench module: ``GemmEnergy = energy_suite(GemmTime)``."""
    name = time_suite.__name__.removesuffix("Time") + "Energy"
    return type(name, (_EnergySuite,), {
        "op": time_suite.op, "params": time_suite.params, "time_suite": time_suite,
        "__module__": time_suite.__module__})


def gate_cases(root: Path | None = None, benchmarks: str = "benchmarks"
               ) -> list[GateCase]:
    """Every case the PR gate can measure, named as asv names it: the timed suites (a
    spec for the measurement worker) and the static figures (a spec and a target), from
    the ``bench_*`` modules of the package ``benchmarks``: the one in the project at
    ``root`` (its working tree's), else the one imported."""
    import importlib
    import itertools
    import pkgutil

    if root is not None:
        from kperf import project
        from kperf.core.worker import register_package

        os.environ.setdefault(project.PROJECT_ENV, str(root))
        register_package(root / benchmarks / "__init__.py")
    package = importlib.import_module(benchmarks)
    out: list[GateCase] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if not info.name.startswith("bench_"):
            continue
        module = importlib.import_module(f"{benchmarks}.{info.name}")
        for suite in vars(module).values():
            if not isinstance(suite, type) or suite.__module__ != module.__name__:
                continue
            # code size changes with almost every kernel edit and is no slowdown by itself:
            # the history and the codegen page show it, the gate does not judge it
            kind = ("time" if issubclass(suite, _TimeSuite)
                    and not issubclass(suite, _EnergySuite) else
                    "static" if issubclass(suite, _StaticFigure)
                    and not issubclass(suite, _Codegen) else
                    "compile" if issubclass(suite, _CompileTime) else "")
            if not kind:
                continue
            method = {"time": "track_time", "static": "track_value",
                      "compile": "track_compile"}[kind]
            for combo in itertools.product(*suite.params):
                params = dict(zip(suite.param_names, combo, strict=True))
                values = ", ".join(repr(v) for v in combo)
                spec: CaseSpec = ({"op": suite.op, **params} if kind == "time" else
                                  {"op": suite.op, "case": suite.case,
                                   "dtype": params["dtype"], "backend": params["backend"]})
                case: GateCase = {"name": f"{info.name}.{suite.__name__}.{method}({values})",
                                  "kind": kind, "spec": spec,
                                  "unit": suite.unit if kind == "static" else "seconds"}
                if kind != "time":
                    case["target"] = params["target"]
                    if kind == "static":
                        case["figure"] = suite.figure
                out.append(case)
    return out
