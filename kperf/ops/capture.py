"""Compile what a Triton wrapper launches, for a target that is not here.

A library's kernels are launched by its own Python code, which chooses the launch: the
block sizes, ``num_warps``, the kernel variant, the specialization of each argument (a
float's type, a pointer's alignment, an integer divisible by 16). ``launches(target)``
runs such code on CPU tensors with Triton's JIT made a compiler for ``target``: every
launch compiles as the JIT would on a GPU of that target and returns without running;
the compiled kernels are kept, in launch order. An op that wraps a library then needs no
copy of its kernels' signatures: its ``aot`` is the library's own call (docs/new-op.md,
"An op that wraps a library").

While it runs, ``torch.version`` says the target's vendor (``hip`` set on AMD, ``cuda``
on NVIDIA), as torch would on that machine: libraries choose launches by it (Liger's
``calculate_settings`` picks num_warps 16 on ROCm where CUDA gets 32). Nothing else of
the host is pretended: a wrapper that asks for a GPU (``torch.cuda.current_device()``)
fails here, naming the call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kperf.ops.targets import Target


@dataclass(frozen=True)
class Launch:
    """One kernel a wrapper launched, compiled for the target."""

    name: str  # the @triton.jit function's name
    kernel: Any  # triton.compiler.CompiledKernel
    constexprs: dict[str, Any]  # its compile-time arguments (BLOCK_SIZE=..., ...)
    num_warps: int


class _CaptureDriver:
    """Enough of a Triton driver for the JIT to compile for ``target`` and nothing more.

    Its device is a key of its own for each capture: the JIT keeps its compiled kernels
    (and the target it compiles for) per device, so another capture, for another target
    or timing a cold compile, finds none of an earlier one's."""

    sessions = 0

    def __init__(self, target: Target) -> None:
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget(*target.triton_target)
        _CaptureDriver.sessions += 1
        self.device = f"kperf-capture-{target.name}-{_CaptureDriver.sessions}"

    def get_current_device(self) -> str:
        return self.device

    def get_current_stream(self, device: str | None = None) -> int:
        return 0

    def get_current_target(self) -> Any:
        return self.target

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def is_active(self) -> bool:
        return True


@contextlib.contextmanager
def _torch_says(vendor: str) -> Iterator[None]:
    import torch

    saved = (torch.version.hip, torch.version.cuda)
    torch.version.hip, torch.version.cuda = ("7.0.0", None) if vendor == "amd" else \
        (None, "13.0")
    try:
        yield
    finally:
        torch.version.hip, torch.version.cuda = saved


@contextlib.contextmanager
def launches(target: Target) -> Iterator[list[Launch]]:
    """Inside: every ``kernel[grid](...)`` compiles for ``target`` and launches nothing;
    the list yielded fills with the launches, in order."""
    from triton.runtime import driver
    from triton.runtime.jit import JITFunction

    found: list[Launch] = []
    real_run = JITFunction.run

    def compile_only(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        kernel = real_run(self, *args, grid=grid, warmup=True, **kwargs)
        if kernel is not None:
            bound = self.signature.bind(*args, **{k: v for k, v in kwargs.items()
                                                 if k in self.signature.parameters})
            constexprs = {self.params[i].name: bound.arguments.get(self.params[i].name)
                          for i in self.constexprs if self.params[i].name in bound.arguments}
            found.append(Launch(self.fn.__name__, kernel, constexprs,
                                int(getattr(kernel.metadata, "num_warps", 0))))
        return kernel

    previous = getattr(driver, "_active", None)
    driver.set_active(_CaptureDriver(target))
    JITFunction.run = compile_only
    try:
        with _torch_says(target.vendor):
            yield found
    finally:
        JITFunction.run = real_run
        driver._active = previous  # as it was (None: chosen on first use; none on a CPU)


def compiled(call: Callable[[], Any], target: Target, kernel: str | None = None) -> Launch:
    """The launch of ``call()`` compiled for ``target``: the one named ``kernel``, else
    its first. A call that launches nothing, or not that kernel, says what it launched."""
    with launches(target) as found:
        call()
    chosen = [f for f in found if kernel is None or f.name == kernel]
    if not chosen:
        raise RuntimeError(f"the call launched {[f.name for f in found] or 'no kernel'}"
                           + (f", not {kernel}" if kernel else ""))
    return chosen[0]


def artifacts(launch: Launch, target: Target) -> dict[str, Any]:
    """The static figures' input (kperf/ops/compat.py ``triton_artifacts``) of a captured
    launch, with the launch's configuration."""
    from kperf.ops import compat

    config = {k: v for k, v in launch.constexprs.items()
              if isinstance(v, int | float | str | bool)} | {"num_warps": launch.num_warps}
    return compat.triton_artifacts(launch.kernel) | {
        "config": config, "kernel": launch.name,
        "threads": launch.num_warps * target.warp_size}
