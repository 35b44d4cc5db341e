"""Every TileLang / Triton API difference between versions, absorbed in one place.

Kernels import their compiler through this module, never directly from a moved
location. When a release moves or renames something, this file changes and the kernels
do not. Known moves:

- TileLang 0.1.12: ``determine_target`` moved from ``tilelang.utils.target`` to
  ``tilelang.backend.target``.
- TileLang 0.1.15: ``T.gemm(k_pack=...)`` (AMD MFMA packing) exists only in the ROCm
  dialect ``tilelang.rocm.language``; ``tilelang.language`` is the CUDA dialect.
- Triton 3.9 warns that the default of ``TRITON_DEFAULT_FP_FUSION`` changes in 3.10:
  we pin fp fusion on explicitly so cross-version numbers do not shift for that reason.
- Triton 3.3: ``ASTSource`` takes ``constexprs=`` and constexpr arguments belong in the
  signature (before: ``constants=``); the ahead-of-time paths need 3.3 or newer.

Version drift (a stack older or newer than the kernels were written for) ends in
``kperf.ops.op.Unsupported`` naming the feature and the version, which asv records as a
skip with that reason: ``require`` checks the known minimum of a feature, ``api_guard``
turns an API error on a version outside ``TESTED`` into a skip (inside it, an error is a
real failure and propagates).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kperf.ops.op import Unsupported
from kperf.ops.targets import Target

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")


def version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("+")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


# ---------------------------------------------------------------- version drift


@dataclass(frozen=True)
class Feature:
    """A compiler API the kernels use, and the releases that have it."""

    package: str  # "triton" | "tilelang"
    since: tuple[int, ...] = ()  # first release with it
    until: tuple[int, ...] | None = None  # first release without it
    why: str = ""


FEATURES: dict[str, Feature] = {
    "triton.aot": Feature("triton", (3, 3), None,
                          "ahead-of-time compile of ASTSource(constexprs=...) for a target "
                          "that is not present (Triton < 3.3 took constants=)"),
    "tilelang.determine_target": Feature("tilelang", (), None,
                                         "target scope for lowering (moved in 0.1.12; "
                                         "both locations are tried)"),
}

# Releases the kernels' compile paths were run on (tests and kperf/stacks/matrix.py). Outside
# these, an API error is version drift; inside them, it is a bug.
TESTED: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "triton": ((3, 6), (3, 8)),
    "tilelang": ((0, 1, 15), (0, 1, 15)),
}

_DRIFT_ERRORS = (ImportError, AttributeError, TypeError)


def installed_version(package: str) -> str:
    """The version of the compiler this process imports (not pip's view of the env)."""
    return str(importlib.import_module(package).__version__)


def _fmt(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def _at_least(version: tuple[int, ...], bound: tuple[int, ...]) -> bool:
    return version[:len(bound)] >= bound


def require(feature: str) -> None:
    """Raise ``Unsupported`` when this stack's compiler lacks ``feature``."""
    spec = FEATURES[feature]
    text = installed_version(spec.package)
    version = version_tuple(text)
    if spec.since and not _at_least(version, spec.since):
        raise Unsupported(f"{feature} needs {spec.package} >= {_fmt(spec.since)}, this stack "
                          f"has {spec.package} {text}: {spec.why}")
    if spec.until is not None and _at_least(version, spec.until):
        raise Unsupported(f"{feature} was removed in {spec.package} {_fmt(spec.until)}, this "
                          f"stack has {spec.package} {text}: {spec.why}")


def tested(package: str, version: tuple[int, ...]) -> bool:
    low, high = TESTED[package]
    return _at_least(version, low) and version[:len(high)] <= high


@contextlib.contextmanager
def api_guard(package: str, feature: str) -> Iterator[None]:
    """Inside: calls into ``package``. An API error there on an untested release is drift."""
    try:
        yield
    except _DRIFT_ERRORS as err:
        text = installed_version(package)
        if tested(package, version_tuple(text)):
            raise
        low, high = TESTED[package]
        raise Unsupported(f"{feature} failed on {package} {text}, outside the tested "
                          f"{_fmt(low)}..{_fmt(high)}: {type(err).__name__}: {err}") from err


# ---------------------------------------------------------------- TileLang


def tilelang() -> ModuleType:
    return importlib.import_module("tilelang")


def tilelang_language(target: Target) -> ModuleType:
    """The ``T`` module for a target: the ROCm dialect on AMD where it exists."""
    if target.vendor == "amd":
        with contextlib.suppress(ModuleNotFoundError):
            return importlib.import_module("tilelang.rocm.language")
    return importlib.import_module("tilelang.language")


def tilelang_gemm_kwargs(target: Target, k_pack: int) -> dict[str, Any]:
    """Extra ``T.gemm`` arguments: ``k_pack`` is AMD-only, and ROCm-dialect-only on 0.1.15+."""
    if target.vendor != "amd" or k_pack == 1:
        return {}
    return {"k_pack": k_pack}


def _determine_target():
    for module in ("tilelang.backend.target", "tilelang.utils.target"):
        with contextlib.suppress(ModuleNotFoundError, AttributeError):
            return importlib.import_module(module).determine_target
    raise Unsupported(f"tilelang.determine_target: this stack's tilelang "
                      f"{installed_version('tilelang')} has none (looked in "
                      f"tilelang.backend.target and tilelang.utils.target)")


@contextlib.contextmanager
def tilelang_target_scope(target: Target) -> Iterator[dict[str, str]]:
    """Lowering reads ``Target.current()`` (T.clear/T.fill), so lower inside this scope."""
    spec = target.tilelang_target
    with api_guard("tilelang", "tilelang.determine_target"):
        scope = _determine_target()(spec, return_object=True)
    with scope:
        yield spec


def _device_attrs(device_mod) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for _, func in device_mod.functions.items():
        if not func.attrs:
            continue
        if "dyn_shared_memory_buf" in func.attrs:
            attrs["shared_bytes"] = int(func.attrs["dyn_shared_memory_buf"])
        if "thread_extent" in func.attrs:
            extent = json.loads(str(func.attrs["thread_extent"]))
            attrs["threads"] = int(extent.get("threadIdx.x", 1) * extent.get("threadIdx.y", 1)
                                   * extent.get("threadIdx.z", 1))
    return attrs


def tilelang_lower_source(prim_func, target: Target) -> tuple[str, dict[str, Any]]:
    """Lower to device source without a GPU or a device compiler: (source, kernel attrs)."""
    tl = tilelang()
    with tilelang_target_scope(target) as spec, api_guard("tilelang", "tilelang.lower"):
        artifact = tl.lower(prim_func, target=spec)
        return artifact.kernel_source, _device_attrs(artifact.device_mod)


def tilelang_compile(prim_func, target: Target | None = None, out_idx=(-1,), **kwargs):
    """Compile to a runnable kernel (target None: the visible GPU)."""
    tl = tilelang()
    spec = "auto" if target is None else target.tilelang_target
    with api_guard("tilelang", "tilelang.compile"):
        return tl.compile(prim_func, out_idx=list(out_idx), target=spec, **kwargs)


# ---------------------------------------------------------------- Triton


def triton_gpu_target(target: Target):
    from triton.backends.compiler import GPUTarget

    return GPUTarget(*target.triton_target)


def triton_aot_aligned(fn, signature: dict[str, str], constexprs: dict[str, Any], target: Target,
                       options: dict[str, Any], aligned: tuple[str, ...] = ()):
    """Compile a ``@triton.jit`` function ahead of time for a target that need not be present,
    with the launch-time specialization the JIT would give: the arguments in
    ``aligned`` (16-byte aligned pointers, integers divisible by 16) carry ``tt.divisibility``,
    and on AMD pointers are marked within 2 GB (buffer ops), as for tensors below 2 GB.

    Without it, memory-bound kernels compile without vectorized loads and their static
    figures describe code that never runs.
    """
    require("triton.aot")
    import triton
    from triton.compiler import ASTSource

    knobs = getattr(triton, "knobs", None)
    buffer_ops = bool(getattr(getattr(knobs, "amd", None), "use_buffer_ops", False))
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    for name in aligned:
        marks: list[list[Any]] = [["tt.divisibility", 16]]
        if target.vendor == "amd" and buffer_ops and signature[name].startswith("*"):
            marks.append(["tt.pointer_range", 32])
        attrs[(fn.arg_names.index(name),)] = marks
    with api_guard("triton", "triton.aot"):
        src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
        return triton.compile(src, target=triton_gpu_target(target), options=options)


def triton_dtype(dtype: str) -> str:
    """Triton's signature name; e4m3 has two encodings: OCP fn ("fp8e4nv": NVIDIA, gfx950)
    and fnuz ("fp8e4b8": AMD gfx942, the only e4m3 its MFMAs take)."""
    return {"fp16": "fp16", "bf16": "bf16", "fp32": "fp32", "fp8e4m3": "fp8e4nv",
            "fp8e4m3fnuz": "fp8e4b8"}[dtype]


def triton_artifacts(compiled) -> dict[str, Any]:
    """The parts of a Triton ``CompiledKernel`` the harness reads static figures from."""
    out: dict[str, Any] = {"shared_bytes": int(getattr(compiled.metadata, "shared", 0) or 0)}
    for key in ("amdgcn", "hsaco", "cubin", "ptx"):
        if key in compiled.asm:
            out[key] = compiled.asm[key]
    return out


def _forget_compiled_kernels() -> None:
    """Empty TileLang's in-process kernel caches (0.1.15: ``KernelCache._memory_cache`` on
    each backend's singleton), so the next compile is a real one: otherwise a second
    compile of the same kernel in a process returns the first in ~10 ms, with no cubin."""
    from tilelang.cache.kernel_cache import KernelCache

    pending = [KernelCache]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        instance = cls.__dict__.get("_instance")
        if instance is not None and isinstance(getattr(instance, "_memory_cache", None), dict):
            instance._memory_cache.clear()


def tilelang_include_dirs() -> list[str]:
    """The folders TileLang's generated source includes from (its ``tl_templates``), as
    TileLang's own HIP build passes them to hipcc."""
    from tilelang import env

    return [str(env.TILELANG_TEMPLATE_PATH)]


def tilelang_artifacts(prim_func, target: Target) -> dict[str, Any]:
    """AMD: device source, shared bytes and the include folders the source needs (hipcc
    is not here: the harness compiles the source to a code object, as hipcc would).
    NVIDIA: one full cold compile with nvcc, giving the cubin as well.

    The cubin is taken from a fresh TileLang cache directory, so the compile is cold and
    the binary found there is this kernel's.
    """
    import tempfile
    from pathlib import Path

    if target.vendor == "amd":
        source, attrs = tilelang_lower_source(prim_func, target)
        return {"source": source, "include_dirs": tilelang_include_dirs(), **attrs}
    previous = os.environ.get("TILELANG_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="tl-aot-") as cache:
        os.environ["TILELANG_CACHE_DIR"] = cache
        _forget_compiled_kernels()
        try:
            with tilelang_target_scope(target):
                kernel = tilelang_compile(prim_func, target)
            out: dict[str, Any] = {"source": kernel.get_kernel_source(),
                                   **_device_attrs(kernel.artifact.device_mod)}
            cubins = sorted(Path(cache).rglob("*.cubin"))
            if cubins:
                out["cubin"] = cubins[0].read_bytes()
        finally:
            if previous is None:
                os.environ.pop("TILELANG_CACHE_DIR", None)
            else:
                os.environ["TILELANG_CACHE_DIR"] = previous
    return out


TILELANG_DTYPE = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}


def tilelang_entry_points(prim_func, default_config):
    """``build`` and ``aot`` for a TileLang kernel module.

    ``prim_func(case, dtype, cfg, target)`` makes the kernel and
    ``default_config(case, target, dtype)`` picks its configuration; keyword overrides
    replace fields of that configuration (for tests and tuning sweeps).
    """
    from dataclasses import asdict, replace

    from kperf.ops.op import Build

    def build(case, dtype: str, target: Target, **overrides: Any) -> Build:
        cfg = replace(default_config(case, target, dtype), **overrides)
        return Build(fn=tilelang_compile(prim_func(case, dtype, cfg, target)), config=asdict(cfg))

    def aot(case, dtype: str, target: Target, **overrides: Any) -> dict[str, Any]:
        """gfx942: HIP source (compiled to a code object by the harness); sm_90a: a full
        nvcc compile to a cubin."""
        cfg = replace(default_config(case, target, dtype), **overrides)
        return tilelang_artifacts(prim_func(case, dtype, cfg, target), target) | {
            "config": asdict(cfg)}

    return build, aot


def triton_launch_options(cfg: Any, target: Target) -> dict[str, Any]:
    """Launch / compile options of a Triton config: ``num_warps`` and ``num_stages``, plus on
    AMD the occupancy hint ``waves_per_eu`` and the MFMA shape ``matrix_instr_nonkdim``."""
    opts: dict[str, Any] = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    if target.vendor == "amd":
        opts["waves_per_eu"] = cfg.waves_per_eu
        opts["matrix_instr_nonkdim"] = cfg.matrix_instr_nonkdim
    return opts
