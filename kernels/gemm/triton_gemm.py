"""Triton GEMM in the style of Triton's matmul tutorial: grouped tile order, fp32 accumulation."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import triton
import triton.language as tl

from kperf.ops import Build, Case, Target, compat


@dataclass(frozen=True)
class Config:
    BM: int
    BN: int
    BK: int
    GROUP_M: int
    num_warps: int
    num_stages: int
    # AMD only: occupancy hint and MFMA shape (16x16 is the fast fp16/bf16 MFMA on CDNA3)
    waves_per_eu: int = 0
    matrix_instr_nonkdim: int = 0

    def launch_options(self, target: Target) -> dict[str, Any]:
        return compat.triton_launch_options(self, target)


# sm_90a: 128x256x64, 4 stages: 192 KB of the 227 KB shared memory, wgmma-friendly.
# gfx942: 256x256x64 is the CDNA3 sweet spot of ROCm's tuning tables; the stream
# pipeliner with 2 stages keeps one tile of A and B in the 64 KB LDS.
DEFAULTS = {
    "sm_90a": Config(BM=128, BN=256, BK=64, GROUP_M=8, num_warps=8, num_stages=4),
    "gfx942": Config(BM=256, BN=256, BK=64, GROUP_M=4, num_warps=8, num_stages=2,
                     waves_per_eu=2, matrix_instr_nonkdim=16),
    # gfx950: gfx942's tile spilled there (256 VGPRs, 49 spills, 120 B of scratch: its
    # 16x16x32 MFMA holds twice the K a step); BK 32 with 3 stages (two 32 KB buffers of
    # the 160 KB LDS) keeps the 256x256 tile at 214 VGPRs, no spills, 2 waves (Triton
    # 3.7.1 code objects, the CPU machine, 2026-12-07; never timed: no gfx950 here)
    "gfx950": Config(BM=256, BN=256, BK=32, GROUP_M=4, num_warps=8, num_stages=3,
                     waves_per_eu=2, matrix_instr_nonkdim=16),
}
# Decode-sized M: a narrow tile in M, wider in K, so the weight stream is spread over all SMs/CUs.
SMALL_M = {
    "sm_90a": Config(BM=64, BN=64, BK=128, GROUP_M=1, num_warps=4, num_stages=4),
    "gfx942": Config(BM=32, BN=64, BK=128, GROUP_M=1, num_warps=4, num_stages=2,
                     waves_per_eu=0, matrix_instr_nonkdim=16),
}


def default_config(case: Case, target: Target) -> Config:
    table = SMALL_M if case.dims["M"] <= 64 else DEFAULTS
    return target.pick(table)


@triton.jit
def grouped_tile(pid, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """(tile row, tile column) of program ``pid`` in grouped ordering: GROUP_M row-tiles
    share their B columns while they are in L2 (Triton's matmul tutorial)."""
    num_pid_n = tl.cdiv(N, BN)
    pids_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // pids_in_group) * GROUP_M
    group_rows = min(tl.cdiv(M, BM) - first_pid_m, GROUP_M)
    return first_pid_m + ((pid % pids_in_group) % group_rows), (pid % pids_in_group) // group_rows


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BM, BN, GROUP_M)

    rm = (pid_m * BM + tl.arange(0, BM)) % M
    rn = (pid_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        k_left = K - k * BK
        a = tl.load(a_ptrs, mask=rk[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk

    cm = pid_m * BM + tl.arange(0, BM)
    cn = pid_n * BN + tl.arange(0, BN)
    c_ptrs = c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))


def matmul(a, b, cfg: Config, target: Target | None = None):
    import torch

    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, cfg.BM) * triton.cdiv(N, cfg.BN),)
    opts = cfg.launch_options(target) if target is not None else {
        "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    matmul_kernel[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                        BM=cfg.BM, BN=cfg.BN, BK=cfg.BK, GROUP_M=cfg.GROUP_M, **opts)
    return c


def build(case: Case, dtype: str, target: Target, **overrides: Any) -> Build:
    cfg = replace(default_config(case, target), **overrides)
    return Build(fn=lambda a, b: matmul(a, b, cfg, target), config=asdict(cfg))


def aot(case: Case, dtype: str, target: Target, **overrides: Any) -> dict[str, Any]:
    """Compiled with the specialization a launch on ``make_inputs``' contiguous tensors gets:
    unit strides are constants (the JIT specializes integers equal to 1), 16-byte aligned
    pointers and sizes and strides divisible by 16 carry ``tt.divisibility``."""
    cfg = replace(default_config(case, target), **overrides)
    t = compat.triton_dtype(dtype)
    d = case.dims
    sizes = {"M": d["M"], "N": d["N"], "K": d["K"], "stride_am": d["K"], "stride_bk": d["N"],
             "stride_cm": d["N"]}
    signature = {"a_ptr": f"*{t}", "b_ptr": f"*{t}", "c_ptr": f"*{t}",
                 "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32",
                 "stride_ak": "constexpr", "stride_bk": "i32", "stride_bn": "constexpr",
                 "stride_cm": "i32", "stride_cn": "constexpr",
                 "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "GROUP_M": "constexpr"}
    constexprs = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BM": cfg.BM, "BN": cfg.BN,
                  "BK": cfg.BK, "GROUP_M": cfg.GROUP_M}
    aligned = ("a_ptr", "b_ptr", "c_ptr", *(name for name, v in sizes.items() if v % 16 == 0))
    compiled = compat.triton_aot_aligned(matmul_kernel, signature, constexprs, target,
                                         cfg.launch_options(target), aligned)
    threads = cfg.num_warps * target.warp_size
    return compat.triton_artifacts(compiled) | {"config": asdict(cfg), "threads": threads}
