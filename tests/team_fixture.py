"""A kernel team's repository, built from nothing: its own package (``myteam_kernels``), one
op written here (no file of kperf's kernels/), three commits:

    c1  the op: a Triton and a TileLang kernel of y = 2 x, kperf init
    c2  a Triton launch change: num_warps 4 -> 8 over blocks of 4096 (its registers move)
    c3  a TileLang tile change: block 1024 -> 4096 elements (its registers move)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests._git import commit, git

INIT = '"""My team\'s kernels."""\n'

OP_INIT = '''"""Scale: y = 2 x, TileLang and Triton against torch."""

from kperf.ops import op_from_modules

OP = op_from_modules(__name__, "bandwidth", "tilelang_scale", "triton_scale")
'''

SPEC = '''"""y = 2 x over a flat tensor: one read, one write."""

from kperf.ops import DTYPE_BYTES, Case

CASES = (Case("hidden-16m", {"N": 4096 * 4096}, pr=True),
         Case("hidden-1m", {"N": 1024 * 1024}))
DTYPES = ("fp16",)
TEST_CASES = (Case("test-ragged", {"N": 1000}),)
TOLERANCE = {"fp16": (1e-3, 1e-3), "fp32": (1e-6, 1e-6)}


def flops(case: Case) -> float:
    return float(case.dims["N"])


def bytes_moved(case: Case, dtype: str) -> float:
    return float(2 * DTYPE_BYTES[dtype] * case.dims["N"])
'''

REFERENCE = '''"""Inputs and the reference of y = 2 x."""

import torch

from kperf.ops import Build, seeded, torch_dtype


def make_inputs(case, dtype, device, seed):
    gen = seeded(device, seed)
    return (torch.randn(case.dims["N"], generator=gen, device=device).to(torch_dtype(dtype)),)


def reference(x):
    return x.double() * 2


def build_torch(case, dtype, target):
    return Build(fn=lambda x: x * 2, config={"library": "torch"})
'''

TRITON = '''"""Triton: a block of elements a program."""

from dataclasses import asdict

import triton
import triton.language as tl

from kperf.ops import Build, compat

BLOCK = 4096
NUM_WARPS = 4


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * 2, mask=mask)


def _launch(x):
    import torch

    y = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK,
                                                   num_warps=NUM_WARPS)
    return y


def build(case, dtype, target, **overrides):
    return Build(fn=_launch, config={"BLOCK": BLOCK, "num_warps": NUM_WARPS})


def aot(case, dtype, target, **overrides):
    t = compat.triton_dtype(dtype)
    compiled = compat.triton_aot_aligned(
        scale_kernel, {"x_ptr": f"*{t}", "y_ptr": f"*{t}", "n": "i32", "BLOCK": "constexpr"},
        {"BLOCK": BLOCK}, target, {"num_warps": NUM_WARPS}, ("x_ptr", "y_ptr", "n"))
    return compat.triton_artifacts(compiled) | {
        "config": {"BLOCK": BLOCK, "num_warps": NUM_WARPS},
        "threads": NUM_WARPS * target.warp_size}
'''

TILELANG = '''"""TileLang: a tile of elements a block, in registers."""

from dataclasses import dataclass

from kperf.ops import compat


@dataclass(frozen=True)
class Config:
    block: int
    threads: int


def default_config(case, target, dtype="fp16"):
    return Config(block=1024, threads=128)


def prim_func(case, dtype, cfg, target):
    T = compat.tilelang_language(target)
    t = compat.TILELANG_DTYPE[dtype]
    N, block = case.dims["N"], cfg.block

    @T.prim_func
    def scale_kernel(X: T.Tensor((N,), t), Y: T.Tensor((N,), t)):
        with T.Kernel(T.ceildiv(N, block), threads=cfg.threads) as bx:
            x = T.alloc_fragment((block,), t)
            T.copy(X[bx * block], x)
            for i in T.Parallel(block):
                x[i] = x[i] * T.cast(2.0, t)
            T.copy(x, Y[bx * block])

    return scale_kernel


build, aot = compat.tilelang_entry_points(prim_func, default_config)
'''


def kperf(repo: Path, *args: str, env: dict[str, str] | None = None,
          timeout: float = 1500) -> subprocess.CompletedProcess:
    """The installed ``kperf`` command in the team's repository."""
    run_env = {k: v for k, v in (env or os.environ).items() if k != "KPERF_PROJECT"}
    return subprocess.run([sys.executable, "-m", "kperf", *args], cwd=repo, env=run_env,
                          capture_output=True, text=True, timeout=timeout)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


def build_team(root: Path) -> dict[str, str]:
    """The repository at ``root`` with its three commits: {"c1": sha, "c2": ..., "c3": ...}."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    package = root / "myteam_kernels"
    (package / "scale").mkdir(parents=True)
    (package / "__init__.py").write_text(INIT)
    for name, text in (("__init__.py", OP_INIT), ("spec.py", SPEC), ("reference.py", REFERENCE),
                       ("triton_scale.py", TRITON), ("tilelang_scale.py", TILELANG)):
        (package / "scale" / name).write_text(text)
    done = kperf(root, "init", "--ops", "myteam_kernels", "--no-workflows")
    assert done.returncode == 0, done.stdout + done.stderr
    shas = {"c1": commit(root, "scale: Triton and TileLang; kperf init")}
    edit(package / "scale" / "triton_scale.py", "NUM_WARPS = 4", "NUM_WARPS = 8")
    shas["c2"] = commit(root, "scale: Triton on 8 warps")
    edit(package / "scale" / "tilelang_scale.py", "Config(block=1024,", "Config(block=4096,")
    shas["c3"] = commit(root, "scale: TileLang tiles of 4096")
    return shas
