"""Generic suites; each ``bench_<op>.py`` subclasses them with its op's static parameters.

Names and parameters are literals in the bench files (asv discovers the suite once, in
one commit's environment); the op's code is imported in ``setup`` from the ``kernels``
package asv installed for the commit being measured. An op, case or backend that does
not exist at that commit raises ``NotImplementedError``: asv records a skip, not a
failure. Names starting with ``_`` are invisible to asv's discovery.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import METHOD_VERSION, record, static, timing
from harness.prepare import prepare
from harness.telemetry import open_source


def _bench_name(obj: object, method: str) -> str:
    module = type(obj).__module__.removeprefix("benchmarks.")
    return f"{module}.{type(obj).__name__}.{method}"


def _require_gpu() -> None:
    import torch

    if not torch.cuda.is_available():
        # Never fall back to the CPU: a CPU number under a GPU benchmark's name is a lie.
        raise RuntimeError("GPU timing suite selected but torch sees no CUDA/ROCm GPU")


class _TimeSuite:
    """Device-event timing of one op x case x dtype x backend on the visible GPU."""

    op: str = ""
    param_names = ("case", "dtype", "backend")
    timeout = 900
    version = METHOD_VERSION

    def setup(self, case: str, dtype: str, backend: str) -> None:
        from kernels.registry import get_op
        from kernels.targets import current_device_target

        op = get_op(self.op)
        op.backend(backend, op.case(case).name)  # missing here: a skip, before any GPU check
        _require_gpu()
        import torch

        self.target = current_device_target()
        self.device_index = torch.cuda.current_device()
        self.prepared = prepare(op, case, dtype, backend, self.target)  # compile + check

    def track_time(self, case: str, dtype: str, backend: str) -> dict[str, Any]:
        from harness.device import TorchDevice

        device = TorchDevice(flush_bytes=2 * self.target.l2_bytes, index=self.device_index)
        source = open_source(device_index=self.device_index)
        plan = timing.Plan().with_overrides(**json.loads(os.environ.get("KPERF_PLAN", "{}")))
        p = self.prepared
        try:
            m = timing.measure(p.calls, device, plan, source)
        finally:
            source.close()
        median = statistics.median(m.samples)
        record.write_record(_bench_name(self, "track_time"),
                            {"case": case, "dtype": dtype, "backend": backend}, {
            "kind": "time", "measurement": m.as_record(), "config": p.config,
            "target": self.target.name, "gpu": device.name, "first_call_s": p.first_call_s,
            "tflops": p.flops / median / 1e12, "gbps": p.bytes_moved / median / 1e9,
            "max_abs_err": p.agreement.max_abs_err, "recorded_at": time.time(),
        })
        return m.asv_result()

    track_time.unit = "seconds"
    track_time.rounds = 2


def kernel_source_digest(op_name: str, root: Path | None = None) -> str:
    """What an op's generated code depends on: its folder and the shared ``kernels/*.py``
    of the installed package, the compilers' versions, nvcc, and harness/static.py."""
    import hashlib
    import importlib.metadata
    import importlib.util
    import shutil

    root = root or Path(importlib.util.find_spec("kernels").origin).parent
    digest = hashlib.sha256()
    for path in sorted([*root.glob("*.py"), *(root / op_name).rglob("*.py")]):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    for dist in ("triton", "tilelang", "apache-tvm-ffi"):
        try:
            digest.update(f"{dist}=={importlib.metadata.version(dist)}".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{dist} absent".encode())
    nvcc = shutil.which("nvcc")
    digest.update(f"nvcc={nvcc}@{os.stat(nvcc).st_mtime_ns if nvcc else 0}".encode())
    digest.update(Path(static.__file__).read_bytes())
    return digest.hexdigest()[:20]


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
    artifacts = be.aot(op.case(case), dtype, tgt)
    figures = static.figures(artifacts, tgt.vendor)
    out = {"figures": figures, "config": artifacts.get("config", {}),
           "artifacts": sorted(k for k in artifacts if k != "config")}
    record.atomic_write_json(path, out)
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


class _CompileTime:
    """Cold-cache compile time for a target, in a process whose compiler is already loaded.

    TileLang gfx942 stops at HIP source (no hipcc here); every other pair is a full
    compile to a device binary (Triton: hsaco / cubin; TileLang sm_90a: nvcc to cubin).
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
        # The first compile in a process pays one-off initialisation; doing it here also
        # turns a kernel this stack cannot build (compat's version checks) into a skip.
        self._cold_compile(dtype)

    def _cold_compile(self, dtype: str) -> float:
        with tempfile.TemporaryDirectory(prefix="kperf-cold-") as cache:
            saved = {k: os.environ.get(k) for k in ("TRITON_CACHE_DIR", "TILELANG_CACHE_DIR")}
            os.environ["TRITON_CACHE_DIR"] = os.environ["TILELANG_CACHE_DIR"] = cache
            try:
                start = time.perf_counter()  # a host timer is right here: compiling is host work
                self.be.aot(self.case_def, dtype, self.target)
                return time.perf_counter() - start
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v

    def track_compile(self, target: str, dtype: str, backend: str) -> dict[str, Any]:
        samples = [self._cold_compile(dtype) for _ in range(self.repeat)]
        return {"samples": samples, "number": 1}

    track_compile.unit = "seconds"


_FIGURES = (("Registers", "registers", "registers"), ("Scratch", "scratch_bytes", "bytes"),
            ("SharedMem", "shared_bytes", "bytes"), ("Occupancy", "occupancy", "waves"))


def cpu_suites(prefix: str, op: str, case: str, module: str,
               dtypes: tuple[str, ...] = ("fp16",)) -> tuple[type, ...]:
    """The suites that need no GPU, for one representative case of an op.

    Returns ``<prefix>Registers, <prefix>Scratch, <prefix>SharedMem, <prefix>Occupancy,
    <prefix>Compile``; assign them to those names in the bench module, so asv finds each
    under the name it was given.
    """
    params = (["gfx942", "sm_90a"], list(dtypes), ["tilelang", "triton"])
    made: list[type] = []
    for suffix, figure, unit in _FIGURES:
        made.append(type(f"{prefix}{suffix}", (_StaticFigure,), {
            "op": op, "case": case, "figure": figure, "unit": unit, "params": params,
            "__module__": module}))
    made.append(type(f"{prefix}Compile", (_CompileTime,), {
        "op": op, "case": case, "params": params, "__module__": module}))
    return tuple(made)
