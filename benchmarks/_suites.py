"""Generic suites; each ``bench_<op>.py`` subclasses them with its op's static parameters.

Names and parameters are literals in the bench files (asv discovers the suite once, in
one commit's environment); the op's code is imported in ``setup`` from the ``kernels``
package asv installed for the commit being measured. An op, case or backend that does
not exist at that commit raises ``NotImplementedError``: asv records a skip, not a
failure. Names starting with ``_`` are invisible to asv's discovery.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import METHOD_VERSION, codeobj, hip, record, static

from ._case import MEASURE_TIMEOUT_S, PREPARE_TIMEOUT_S, case_op, worker_client

BENCH_REGEX = "KPERF_BENCH_REGEX"  # asv's -b regexes of the run, a JSON list
# When an op's baseline (torch) is timed: "changed" (default) at a commit where what its
# timing depends on (baseline_digest) differs from every earlier measurement on this
# machine; "every" at every commit. Its code is the yardstick, not the code under test
# (the PR gate leaves it out too), and it was 71 of the 213 timed cases of a run.
BASELINE_POLICY = "KPERF_BASELINE"
# When an op's compile suite times its cold compiles: "changed" (default) at a commit where
# what a compile depends on (compile_digest) differs from every earlier timing on this
# machine; "every" at every commit. A compile's time follows its source and compiler, and
# the seven compile suites were ~200 s of a run whose kernels had not changed.
COMPILE_POLICY = "KPERF_COMPILE"
TIMING_POLICIES = ("changed", "every")
# Adaptive trials (harness/timing.py, ``Plan.stop_rel_ci``): a case stops sampling once the
# 95% interval of its median is within this share of its class's smallest reported change
# (thresholds.json: ``min_ratio`` of the class of the first rule its Time name matches),
# e.g. 0.1% for a bandwidth-bound kernel at 0.5%. Then the trials' own uncertainty adds
# little to what moves a case between runs of one commit (0.24% for the row ops, median,
# H200, 2026-12-02, docs/journal/2026-12-02.md "Midday of 2026-12-02"). KPERF_PLAN's
# ``stop_rel_ci``, where given, wins (0: every case takes its ``trials``).
PRECISION_SHARE = 0.2
THRESHOLDS = Path(__file__).resolve().parent.parent / "thresholds.json"


def case_name(benchmark: str, combo: Sequence[Any]) -> str:
    """``benchmark(param, ...)`` with each parameter's repr: how asv's ``-b`` and the
    gate's rules (thresholds.json) name a case."""
    return f"{benchmark}({', '.join(map(repr, combo))})"


def trial_precision(name: str, thresholds: Path = THRESHOLDS) -> float:
    """``Plan.stop_rel_ci`` for the case ``name``: PRECISION_SHARE of its class's
    ``min_ratio`` (0, no early stop, for a class without one or no matching rule)."""
    raw = json.loads(thresholds.read_text())
    for rule in raw["rules"]:
        if re.search(rule["match"], name):
            return PRECISION_SHARE * float(raw["classes"][rule["class"]].get("min_ratio", 0))
    return 0.0


def _bench_name(obj: object, method: str) -> str:
    module = type(obj).__module__.removeprefix("benchmarks.")
    return f"{module}.{type(obj).__name__}.{method}"


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
    version = METHOD_VERSION
    consumer = "time"  # which reader of a case's one measurement this suite is
    method = "track_time"

    def setup(self, case: str, dtype: str, backend: str) -> None:
        op = case_op(self.op)  # on CPU (tests) also the op's small test cases
        op.backend(backend, op.case(case).name)  # missing here: a skip, before any GPU work
        self.spec = {"op": self.op, "case": case, "dtype": dtype, "backend": backend}
        self.baseline_key = baseline_digest(self.op) if backend == op.baseline else None
        if self.baseline_key:
            skip_unchanged_baseline(_time_name(type(self)), self.spec, self.baseline_key)
        self.worker = worker_client()
        ready = self.worker.request({"op": "prepare", "spec": self.spec,
                                     "consumer": self.consumer, "batch": self.selected()},
                                    PREPARE_TIMEOUT_S)
        print(f"kperf: {self.op}/{case}/{dtype}/{backend}: {ready['compile']}",
              file=sys.stderr)

    def selected(self) -> list[dict[str, Any]]:
        """The cases of this suite the run measures: asv's ``-b`` regexes (passed on by
        tools.bench as ``KPERF_BENCH_REGEX``, a JSON list) matched as asv matches them, on
        ``name(param, ...)`` with each parameter's repr."""
        regexes = json.loads(os.environ.get(BENCH_REGEX, "[]"))
        name = _bench_name(self, self.method)
        return [dict(zip(("op", *self.param_names), (self.op, *combo), strict=True))
                for combo in itertools.product(*self.params)
                if not regexes or any(re.search(r, case_name(name, combo)) for r in regexes)]

    def _measure(self) -> dict[str, Any]:
        plan = json.loads(os.environ.get("KPERF_PLAN", "{}"))
        if "stop_rel_ci" not in plan:
            combo = [self.spec[k] for k in self.param_names]
            plan["stop_rel_ci"] = trial_precision(case_name(_time_name(type(self)), combo))
        result = self.worker.request({"op": "measure", "spec": self.spec, "plan": plan,
                                      "consumer": self.consumer}, MEASURE_TIMEOUT_S)
        if result["fresh"]:  # one record per measurement, whichever benchmark reads it first
            params = {k: self.spec[k] for k in self.param_names}
            record.write_record(_time_name(type(self)), params, {
                "kind": "time", "recorded_at": time.time(),
                **({"baseline_key": self.baseline_key} if self.baseline_key else {}),
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


def timing_policy(variable: str) -> str:
    """``changed`` or ``every``, from the environment variable (BASELINE_POLICY or
    COMPILE_POLICY)."""
    policy = os.environ.get(variable, "changed")
    if policy not in TIMING_POLICIES:
        raise ValueError(f"{variable}={policy!r}: expected one of {TIMING_POLICIES}")
    return policy


def baseline_digest(op_name: str, root: Path | None = None) -> str:
    """What the timing of an op's baseline depends on besides the machine: the op's folder
    without its compiled backends' modules, the shared ``kernels/*.py``, the measuring
    code (harness, benchmarks/_case.py), torch's version, the run's plan, and the GPU's
    identity as its telemetry gives it (driver, power limit)."""
    import hashlib

    import harness
    from harness.telemetry import open_source

    root = root or _kernels_root()
    op = case_op(op_name)
    others = {root.joinpath(*be.module.split(".")[1:]).with_suffix(".py")
              for name, be in op.backends.items() if name != op.baseline and be.module}
    digest = hashlib.sha256()
    _hash_files(digest, root, [p for p in _op_files(root, op_name) if p not in others])
    harness_dir = Path(harness.__file__).parent
    _hash_files(digest, harness_dir.parent, [*harness_dir.rglob("*.py")])
    _hash_files(digest, Path(__file__).parent, [Path(__file__).with_name("_case.py")])
    _hash_versions(digest, ("torch",))
    source = open_source()
    try:
        identity = source.identity()
    finally:
        source.close()
    digest.update(json.dumps(identity, sort_keys=True, default=str).encode())
    digest.update(os.environ.get("KPERF_PLAN", "{}").encode())
    return digest.hexdigest()[:20]


def skip_unchanged_baseline(time_name: str, spec: dict[str, Any], key: str) -> None:
    """Under the "changed" policy, a skip (``NotImplementedError``) when this machine timed
    this baseline case at another commit with the same ``baseline_digest``."""
    where = timed_elsewhere(BASELINE_POLICY, time_name,
                            {k: spec[k] for k in _CaseSuite.param_names}, "baseline_key", key)
    if where:
        raise NotImplementedError(
            f"{spec['op']}/{spec['case']}/{spec['dtype']}/{spec['backend']}: the baseline is "
            f"unchanged since commit {where} (same code, measuring code, torch and GPU), "
            f"timed there on this machine; {BASELINE_POLICY}=every times it at every commit")


def timed_elsewhere(policy: str, benchmark: str, params: dict[str, Any], key_field: str,
                    key: str, root: Path | None = None) -> str | None:
    """The commit (8 characters) at which this machine timed ``benchmark(params)`` with the
    same key, if the policy lets that timing stand for this commit's; else None. A commit
    that timed it before is timed again: a rerun replaces a measurement, never blanks it."""
    if timing_policy(policy) == "every":
        return None
    commit = os.environ.get("ASV_COMMIT", "")
    same = [r for r in record.machine_records(benchmark, params, root)
            if r.get(key_field) == key and (r.get("measurement") or r.get("samples"))]
    if not same or any(r.get("commit") == commit for r in same):
        return None
    return str(same[-1].get("commit") or "?")[:8]


def _time_name(suite: type) -> str:
    time_suite = getattr(suite, "time_suite", suite)
    module = time_suite.__module__.removeprefix("benchmarks.")
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


def compile_digest(op_name: str, root: Path | None = None) -> str:
    """What an op's compile time depends on besides the host: its kernel sources and
    compilers (``kernel_source_digest``), this module (the compile timing) and Python."""
    import hashlib

    digest = hashlib.sha256(kernel_source_digest(op_name, root).encode())
    digest.update(Path(__file__).read_bytes())
    digest.update(sys.version.encode())
    return digest.hexdigest()[:20]


def compile_record_root() -> Path:
    """Where the compile suites note what they timed: beside the measurement records, not
    among them (those are read as device-timed samples by the site and the gate)."""
    return record.record_root().parent / "compile-records"


def kernel_source_digest(op_name: str, root: Path | None = None) -> str:
    """What an op's generated code depends on: its folder and the shared ``kernels/*.py``
    of the installed package, the compilers' versions, nvcc, the gfx942 toolchain that
    compiles TileLang's HIP source (``harness.hip``) and the static figures' readers."""
    import hashlib
    import shutil

    root = root or _kernels_root()
    digest = hashlib.sha256()
    _hash_files(digest, root, _op_files(root, op_name))
    _hash_versions(digest, ("triton", "tilelang", "apache-tvm-ffi"))
    nvcc = shutil.which("nvcc")
    digest.update(f"nvcc={nvcc}@{os.stat(nvcc).st_mtime_ns if nvcc else 0}".encode())
    digest.update(hip.toolchain_identity().encode())
    for reader in (static, hip, codeobj):
        digest.update(Path(reader.__file__).read_bytes())
    return digest.hexdigest()[:20]


def _kernels_root() -> Path:
    """The installed ``kernels`` package (the commit's, in an asv environment)."""
    import importlib.util

    return Path(importlib.util.find_spec("kernels").origin).parent


def _op_files(root: Path, op_name: str) -> list[Path]:
    """An op's folder and the shared ``kernels/*.py``."""
    return [*root.glob("*.py"), *(root / op_name).rglob("*.py")]


def _hash_files(digest: Any, root: Path, paths: list[Path]) -> None:
    """Each file's path under ``root`` and its bytes, in path order."""
    for path in sorted(paths):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())


def _hash_versions(digest: Any, dists: tuple[str, ...]) -> None:
    import importlib.metadata

    for dist in dists:
        try:
            digest.update(f"{dist}=={importlib.metadata.version(dist)}".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{dist} absent".encode())


def _static_cache_path(key: dict[str, str]) -> Path:
    """Keyed by content, not commit: base and head of a PR that leaves an op alone share
    its compiles, and the gate's later rounds reuse the first round's."""
    base = Path(os.environ.get("ASV_ENV_DIR", tempfile.gettempdir())) / "kperf-static"
    name = record.params_key({**key, "source": kernel_source_digest(key["op"])})
    return base / f"{name}.json"


def static_figures(op_name: str, case: str, dtype: str, backend: str, target: str) -> dict:
    """Compile ahead of time for ``target`` (no GPU needed) and read the static figures.

    Cached per environment and kernel source: the figure suites share one compile per kernel.
    """
    key = {"op": op_name, "case": case, "dtype": dtype, "backend": backend, "target": target}
    path = _static_cache_path(key)
    if path.exists():
        return json.loads(path.read_text())
    from kernels.registry import get_op
    from kernels.targets import get_target

    op = get_op(op_name)
    be = op.backend(backend, case)
    if be.aot is None:
        raise NotImplementedError(f"{op_name}/{backend} has no ahead-of-time compile path")
    tgt = get_target(target)
    return keep_static_figures(key, device_artifacts(be, op.case(case), dtype, tgt), tgt.vendor)


def device_artifacts(be: Any, case_def: Any, dtype: str, target: Any) -> dict[str, Any]:
    """A backend's ahead-of-time artifacts for a target down to a device binary: TileLang's
    gfx942 HIP source is compiled to a code object here, by the toolchain the run names
    (``harness.hip``), as hipcc would on a ROCm machine."""
    return hip.with_code_object(be.aot(case_def, dtype, target), target.vendor, target.arch)


def keep_static_figures(key: dict[str, str], artifacts: dict[str, Any],
                        vendor: str) -> dict[str, Any]:
    """The static figures of a compile's artifacts, kept where ``static_figures`` looks."""
    out = {"figures": static.figures(artifacts, vendor), "config": artifacts.get("config", {}),
           "artifacts": sorted(k for k in artifacts if k != "config")}
    record.atomic_write_json(_static_cache_path(key), out)
    return out


class _StaticFigure:
    """One static figure of the code generated for a target: registers, LDS bytes, ..."""

    op: str = ""
    case: str = ""
    figure: str = ""
    unit: str = ""
    params = (["gfx942", "sm_90a"], ["fp16"], ["tilelang", "triton"])
    param_names = ("target", "dtype", "backend")
    timeout = 600

    def setup(self, target: str, dtype: str, backend: str) -> None:
        what = f"{self.op}/{self.case}/{dtype}/{backend}@{target}"
        result = static_figures(self.op, self.case, dtype, backend, target)
        if self.figure not in result["figures"]:
            raise static.FigureUnavailable(
                f"{what}: {self.figure} not derivable from artifacts {result['artifacts']}")
        self.value = result["figures"][self.figure]

    def track_value(self, target: str, dtype: str, backend: str) -> float:
        return self.value


def codegen_record_root() -> Path:
    """Where the code-size suites keep every static figure of a kernel (the codegen page
    reads them): beside the compile records, not among the device-timed records."""
    return record.record_root().parent / "codegen-records"


class _Codegen(_StaticFigure):
    """Code size, and a record of every static figure of the kernel (registers, spills,
    LDS, occupancy and its limit, the instruction mix) for the site's codegen page, named
    by the gfx942 toolchain that compiled it."""

    figure = "code_bytes"
    unit = "bytes"

    def setup(self, target: str, dtype: str, backend: str) -> None:
        result = static_figures(self.op, self.case, dtype, backend, target)
        params = dict(zip(self.param_names, (target, dtype, backend), strict=True))
        record.write_record(_bench_name(self, "track_value"), params, {
            "kind": "codegen", "op": self.op, "case": self.case,
            "toolchain": hip.toolchain_name() if target == "gfx942" else None,
            "figures": result["figures"], "config": result["config"],
            "recorded_at": time.time()}, codegen_record_root())
        super().setup(target, dtype, backend)


class _CompileTime:
    """Cold-cache compile time for a target, in a process whose compiler is already loaded.

    Every pair is a full compile to a device binary: Triton to a hsaco or cubin, TileLang
    sm_90a with nvcc to a cubin, TileLang gfx942 to HIP source and on to a code object by
    the run's gfx942 toolchain (``harness.hip``, hipcc's stand-in), so the two languages'
    times compare like with like.
    """

    op: str = ""
    case: str = ""
    params = (["gfx942", "sm_90a"], ["fp16"], ["tilelang", "triton"])
    param_names = ("target", "dtype", "backend")
    timeout = 900
    repeat = 3

    def setup(self, target: str, dtype: str, backend: str) -> None:
        from kernels.registry import get_op
        from kernels.targets import get_target

        op = get_op(self.op)
        self.case_def, self.be = op.case(self.case), op.backend(backend, self.case)
        if self.be.aot is None:
            raise NotImplementedError(f"{self.op}/{backend} has no ahead-of-time compile path")
        self.target = get_target(target)
        self.compile_key = compile_digest(self.op)
        where = timed_elsewhere(COMPILE_POLICY, _bench_name(self, "track_compile"),
                                self._params(target, dtype, backend), "compile_key",
                                self.compile_key, compile_record_root())
        if where:
            raise NotImplementedError(
                f"{self.op}/{self.case}/{dtype}/{backend}@{target}: its kernel source and "
                f"compilers are unchanged since commit {where}, whose cold compiles this "
                f"machine timed; {COMPILE_POLICY}=every times them at every commit")
        self._prime(backend, dtype)

    def _params(self, target: str, dtype: str, backend: str) -> dict[str, str]:
        return dict(zip(self.param_names, (target, dtype, backend), strict=True))

    def _prime(self, backend: str, dtype: str) -> None:
        """Untimed: the process's one-off initialisation, paid on a small kernel.

        A process's first cold compile took 1.7-8.8x its next three for Triton and up to
        1.4x for TileLang; after an untimed RMSNorm compile for the same target and
        backend, the op's first took what its next three took, and the RMSNorm compile
        cost 0.4-2.5 s where the op's own first took 0.8-6.4 s (CPU machine, 2026-12-02,
        docs/journal/2026-12-02.md "The compile suites' first compile"). Without a primer at this
        commit, or one this stack cannot build, the op's own kernel primes, which also
        turns a kernel this stack cannot build into a skip here."""
        from kernels.registry import get_op

        try:
            primer = get_op(PRIMER[0])
            self._compile_cold(primer.backend(backend, PRIMER[1]), primer.case(PRIMER[1]),
                               "fp16")
        except Exception:  # any failure of the primer: the op primes, as before
            self._compile_cold(self.be, self.case_def, dtype)

    def _compile_cold(self, be: Any, case_def: Any, dtype: str) -> tuple[float, dict[str, Any]]:
        """(seconds, artifacts) of a compile with empty compiler caches."""
        with tempfile.TemporaryDirectory(prefix="kperf-cold-") as cache:
            saved = {k: os.environ.get(k) for k in ("TRITON_CACHE_DIR", "TILELANG_CACHE_DIR")}
            os.environ["TRITON_CACHE_DIR"] = os.environ["TILELANG_CACHE_DIR"] = cache
            try:
                start = time.perf_counter()  # a host timer is right here: compiling is host work
                artifacts = device_artifacts(be, case_def, dtype, self.target)
                return time.perf_counter() - start, artifacts
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v

    def track_compile(self, target: str, dtype: str, backend: str) -> dict[str, Any]:
        from asv_runner.benchmarks.mark import SkipNotImplemented

        samples = []
        for _ in range(self.repeat):
            try:
                seconds, artifacts = self._compile_cold(self.be, self.case_def, dtype)
            except NotImplementedError as err:  # this stack cannot build it: asv's skip
                raise SkipNotImplemented(str(err)) from err
            if not samples:  # the figure suites (asv runs them next) need not compile it
                with contextlib.suppress(Exception):  # they then compile and report
                    keep_static_figures({"op": self.op, "case": self.case, "dtype": dtype,
                                         "backend": backend, "target": target}, artifacts,
                                        self.target.vendor)
            samples.append(seconds)
        record.write_record(_bench_name(self, "track_compile"),
                            self._params(target, dtype, backend),
                            {"kind": "compile", "compile_key": self.compile_key,
                             "samples": samples, "recorded_at": time.time()},
                            compile_record_root())
        return {"samples": samples, "number": 1}

    track_compile.unit = "seconds"


# The compile suites' primer: (op, case), a small kernel every target and backend builds.
PRIMER = ("rmsnorm", "llama3-8b.hidden")

_FIGURES = (("Registers", "registers", "registers"), ("Scratch", "scratch_bytes", "bytes"),
            ("SharedMem", "shared_bytes", "bytes"), ("Occupancy", "occupancy", "waves"))


def cpu_suites(prefix: str, op: str, case: str, module: str,
               dtypes: tuple[str, ...] = ("fp16",)) -> tuple[type, ...]:
    """The suites that need no GPU, for one representative case of an op.

    Returns ``<prefix>Registers, <prefix>Scratch, <prefix>SharedMem, <prefix>Occupancy,
    <prefix>CodeSize, <prefix>Compile``; assign them to those names in the bench module, so
    asv finds each under the name it was given.
    """
    params = (["gfx942", "sm_90a"], list(dtypes), ["tilelang", "triton"])
    made: list[type] = []
    for suffix, figure, unit in _FIGURES:
        made.append(type(f"{prefix}{suffix}", (_StaticFigure,), {
            "op": op, "case": case, "figure": figure, "unit": unit, "params": params,
            "__module__": module}))
    made.append(type(f"{prefix}CodeSize", (_Codegen,), {
        "op": op, "case": case, "params": params, "__module__": module}))
    made.append(type(f"{prefix}Compile", (_CompileTime,), {
        "op": op, "case": case, "params": params, "__module__": module}))
    return tuple(made)


def gate_cases() -> list[dict[str, Any]]:
    """Every case the PR gate can measure, named as asv names it: the timed suites (a
    spec for the measurement worker) and the static figures (a spec and a target)."""
    import importlib
    import itertools
    import pkgutil

    package = importlib.import_module(__package__)
    out: list[dict[str, Any]] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if not info.name.startswith("bench_"):
            continue
        module = importlib.import_module(f"{__package__}.{info.name}")
        for suite in vars(module).values():
            if not isinstance(suite, type) or suite.__module__ != module.__name__:
                continue
            # code size changes with almost every kernel edit and is no slowdown by itself:
            # the history and the codegen page show it, the gate does not judge it
            kind = ("time" if issubclass(suite, _TimeSuite)
                    and not issubclass(suite, _EnergySuite) else
                    "static" if issubclass(suite, _StaticFigure)
                    and not issubclass(suite, _Codegen) else "")
            if not kind:
                continue
            method = "track_time" if kind == "time" else "track_value"
            for combo in itertools.product(*suite.params):
                params = dict(zip(suite.param_names, combo, strict=True))
                values = ", ".join(repr(v) for v in combo)
                case = {"name": f"{info.name}.{suite.__name__}.{method}({values})",
                        "kind": kind, "unit": "seconds" if kind == "time" else suite.unit}
                if kind == "time":
                    case["spec"] = {"op": suite.op, **params}
                else:
                    case["spec"] = {"op": suite.op, "case": suite.case, "dtype": params["dtype"],
                                    "backend": params["backend"]}
                    case["target"], case["figure"] = params["target"], suite.figure
                out.append(case)
    return out
