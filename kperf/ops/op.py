"""The op: kperf's one extension point (modelled on tritonbench's operator registry).

An op folder ``<package>/<op>/`` exposes ``OP: OpDef`` from its ``__init__``: the cases
(named after the model layer they come from), how to build inputs, the PyTorch
reference, the FLOP and byte counts for roofline figures, one ``Backend`` per
implementation, and what the gate and the history need to know of it: its class (how
its time is judged: compute, bandwidth, decode, launch; a case may declare its own) and
which cases the default PR subset measures. Backends import their compiler (TileLang,
Triton) only when built, so that listing an op never pays for an import.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kperf.ops.targets import Target

# A built kernel: called with one input tuple, returns the output tensor(s).
Kernel = Callable[..., Any]


class Unsupported(NotImplementedError):
    """This backend cannot express this case (recorded by asv as skipped, with the reason)."""


@dataclass(frozen=True)
class Case:
    name: str  # "llama3-70b.down_proj": model and layer the shape comes from
    dims: dict[str, int]  # e.g. {"M": 8192, "N": 8192, "K": 28672}
    note: str = ""
    klass: str = ""  # its class where it is not its op's ("decode": a decode-sized case)
    pr: bool = False  # in the PR gate's default subset (its op's ``pr_dtypes``)


@dataclass(frozen=True)
class Build:
    """A compiled kernel plus the configuration that was chosen for it."""

    fn: Kernel
    config: dict[str, Any]


@dataclass(frozen=True)
class Backend:
    name: str  # "tilelang" | "triton" | "torch"
    # build(case, dtype, target) -> Build; compiles (and autotunes) outside any timing.
    build: Callable[[Case, str, Target], Build]
    # aot(case, dtype, target) -> the artifacts generated for a target that need not be
    # present: any of "amdgcn" (text), "cubin" (bytes), "source" (text), "shared_bytes",
    # plus "config". The harness turns them into static figures (registers, spills, LDS).
    aot: Callable[[Case, str, Target], dict[str, Any]] | None = None
    module: str = ""  # the module holding a compiled backend's code ("": none of its own)


@dataclass(frozen=True)
class OpDef:
    name: str
    # how the gate and the history judge its times: a class of thresholds.json
    # ("compute" | "bandwidth" | "decode" | "launch"); a case may declare its own
    klass: str
    cases: Sequence[Case]
    dtypes: Sequence[str]
    # make_inputs(case, dtype, device, seed) -> tuple of tensors for one call
    make_inputs: Callable[[Case, str, str, int], tuple]
    # reference(*inputs) -> output computed in higher precision (fp32 or fp64)
    reference: Callable[..., Any]
    flops: Callable[[Case], float]
    bytes_moved: Callable[[Case, str], float]
    backends: dict[str, Backend]
    # (rtol, atol) per input dtype for comparing with the reference
    tolerance: dict[str, tuple[float, float]] = field(default_factory=dict)
    # the backend a ratio is taken against (vendor library or torch's best path)
    baseline: str = "torch"
    # small shapes for CPU tests (Triton interpreter); dtypes the interpreter gets right
    test_cases: Sequence[Case] = ()
    test_dtypes: Sequence[str] = ("fp16", "fp32")
    # cases a backend cannot express, with the reason: {(backend, case name): reason}
    unsupported: dict[tuple[str, str], str] = field(default_factory=dict)
    # the dtypes of the PR subset's cases (``Case.pr``); default: the first of ``dtypes``
    pr_dtypes: Sequence[str] = ()

    def class_of(self, case: str) -> str:
        """The class of a case: its own, else its op's."""
        return self.case(case).klass or self.klass

    def case(self, name: str) -> Case:
        for case in self.cases:
            if case.name == name:
                return case
        raise Unsupported(f"op {self.name!r} has no case {name!r} at this commit")

    def backend(self, name: str, case: str | None = None) -> Backend:
        reason = self.unsupported.get((name, case or ""))
        if reason:
            raise Unsupported(f"{self.name}/{case}: {name} cannot express it: {reason}")
        try:
            return self.backends[name]
        except KeyError:
            raise Unsupported(f"op {self.name!r} has no {name!r} backend at this commit") from None


DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "fp8e4m3": 1}


def torch_dtype(name: str):
    import torch

    return {
        "fp16": torch.float16,
        "bf16": torch.bfloat16,
        "fp32": torch.float32,
        "fp8e4m3": torch.float8_e4m3fn,
    }[name]


def seeded(device: str, seed: int):
    """A seeded generator on the device the inputs are for. Each op's largest case took
    0.59-3.94 s to draw on the host and copy, and 0.4-7.8 ms to draw on the GPU (H200
    machine, 2026-12-02, median of three, docs/journal/2026-12-02.md "Early morning of 2026-12-02"),
    and every worker draws them again. The same seed, device kind and torch give the
    same values; a GPU's differ from the CPU's, from the same distribution."""
    import torch

    return torch.Generator(device=device).manual_seed(seed)


def compiled_backend(name: str, module: str) -> Backend:
    """A backend whose ``build`` and ``aot`` live in ``module``, imported only when used.

    Listing an op then never imports its compiler (TileLang's import alone takes ~3 s, and
    must not happen before asv's fork server forks on a GPU machine).
    """

    def build(case: Case, dtype: str, target: Target, **overrides: Any) -> Build:
        return importlib.import_module(module).build(case, dtype, target, **overrides)

    def aot(case: Case, dtype: str, target: Target, **overrides: Any) -> dict[str, Any]:
        return importlib.import_module(module).aot(case, dtype, target, **overrides)

    return Backend(name, build, aot, module)


def op_from_modules(package: str, klass: str, tilelang: str, triton: str,
                    **overrides: Any) -> OpDef:
    """The OpDef of an op folder laid out like ``kernels/gemm`` (``kperf new-op`` writes one).

    ``package`` holds ``spec`` (CASES, DTYPES, TEST_CASES, TOLERANCE, flops, bytes_moved)
    and ``reference`` (make_inputs, reference, build_torch); ``tilelang`` and ``triton``
    name the kernel modules inside it.
    """
    spec = importlib.import_module(f"{package}.spec")
    ref = importlib.import_module(f"{package}.reference")
    fields: dict[str, Any] = dict(
        name=package.rsplit(".", 1)[-1], klass=klass, cases=spec.CASES, dtypes=spec.DTYPES,
        make_inputs=ref.make_inputs, reference=ref.reference, flops=spec.flops,
        bytes_moved=spec.bytes_moved, tolerance=spec.TOLERANCE, baseline="torch",
        test_cases=spec.TEST_CASES, pr_dtypes=getattr(spec, "PR_DTYPES", ()),
        backends={"tilelang": compiled_backend("tilelang", f"{package}.{tilelang}"),
                  "triton": compiled_backend("triton", f"{package}.{triton}"),
                  "torch": Backend("torch", ref.build_torch)})
    fields.update(overrides)
    return OpDef(**fields)
