"""Hardware targets the kernels are tuned and compiled for.

A target names what code generation needs (backend, arch, wave size) and the limits
that tile choices must respect (LDS / shared memory per block). Per-target tile
defaults live with each op; this module only describes the hardware.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

V = TypeVar("V")


@dataclass(frozen=True)
class Target:
    name: str  # the name used in benchmark parameters: "gfx942", "sm_90a"
    vendor: str  # "amd" | "nvidia"
    arch: str  # "gfx942" | "sm_90a"
    warp_size: int  # 64 on CDNA (wave64), 32 on NVIDIA
    shared_mem_bytes: int  # LDS (AMD) / max dynamic shared memory per block (NVIDIA)
    sm_count: int  # CUs (AMD) / SMs (NVIDIA) of the reference part
    l2_bytes: int  # last-level cache a flush must defeat (MI300X: 256 MB Infinity Cache)
    tunes_like: str | None = None  # whose tiles an op without its own entry for it uses

    def pick(self, table: Mapping[Any, V], *key: Any) -> V:
        """This target's entry of an op's per-target table (keyed by target name, or by
        ``(name, *key)``); an op with no entry of this target's own takes the entry of the
        target it ``tunes_like`` (gfx950 starts from gfx942's tiles)."""
        for name in (self.name, self.tunes_like):
            entry = (name, *key) if key else name
            if name is not None and entry in table:
                return table[entry]
        raise KeyError(f"no entry for {self.name}{' ' + repr(key) if key else ''}"
                       f"{f' or {self.tunes_like}' if self.tunes_like else ''} in the op's table")

    @property
    def tilelang_target(self) -> dict[str, str]:
        if self.vendor == "amd":
            return {"kind": "hip", "mcpu": self.arch}
        return {"kind": "cuda", "arch": self.arch}

    @property
    def triton_target(self) -> tuple[str, str | int, int]:
        """Arguments of ``triton.backends.compiler.GPUTarget``."""
        if self.vendor == "amd":
            return ("hip", self.arch, self.warp_size)
        # Triton names Hopper "90"; the "a" features are enabled by the backend itself.
        return ("cuda", int(self.arch.removeprefix("sm_").rstrip("a")), self.warp_size)


GFX942 = Target("gfx942", "amd", "gfx942", 64, 64 * 1024, 304, 256 * 2**20)
# gfx950 (MI350X / MI355X): gfx942's register file and wave size, 160 KiB of LDS, 256 CUs
GFX950 = Target("gfx950", "amd", "gfx950", 64, 160 * 1024, 256, 256 * 2**20, tunes_like="gfx942")
SM90A = Target("sm_90a", "nvidia", "sm_90a", 32, 227 * 1024, 132, 50 * 2**20)

TARGETS: dict[str, Target] = {t.name: t for t in (GFX942, GFX950, SM90A)}


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise KeyError(f"unknown target {name!r}; known: {sorted(TARGETS)}") from None


def target_of_device(device_arch: str) -> Target:
    """Map a live device's arch string (``gcnArchName`` or ``sm_XY``) to a tuning target.

    Unknown parts fall back to the closest family member, by vendor, so a kernel still
    gets sensible tiles on e.g. an MI250 (gfx90a) or an H100 (sm_90).
    """
    arch = device_arch.split(":")[0]
    if arch in TARGETS:
        return TARGETS[arch]
    if arch.startswith("gfx"):
        return GFX942
    if arch.startswith("sm_"):
        return SM90A
    raise ValueError(f"cannot map device arch {device_arch!r} to a target")


def current_device_target() -> Target:
    """The target of the visible GPU (CUDA or ROCm); raises if there is none."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA/ROCm GPU is visible to torch")
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    if torch.version.hip:
        return target_of_device(props.gcnArchName)
    return target_of_device(f"sm_{props.major}{props.minor}")
