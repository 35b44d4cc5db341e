"""Triton FP8 GEMM: tl.dot on e4m3 tiles into fp32, row/column scales applied in the epilogue.

The structure is the GEMM op's (grouped tile order, wrapped M/N indices, masked K), with the
two scale vectors read once per tile after the K loop.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import triton
import triton.language as tl

from kernels.gemm.triton_gemm import grouped_tile
from kperf.ops import Build, Case, Target, compat

from .spec import OUT_DTYPE, check_dtype, fp8_format


@dataclass(frozen=True)
class Config:
    BM: int
    BN: int
    BK: int
    GROUP_M: int
    num_warps: int
    num_stages: int
    # AMD only: occupancy hint and MFMA shape (16x16x32 is CDNA3's fp8 MFMA)
    waves_per_eu: int = 0
    matrix_instr_nonkdim: int = 0
    # NVIDIA only: K elements summed in the fp8 wgmma accumulator before the partial sum is
    # added in fp32. Triton's sm_90 default (2**30) never promotes, and Hopper's fp8
    # accumulator keeps too few mantissa bits: on an H200 (2026-12-01) both this kernel and
    # the TileLang one failed the fp32-reference check at K=8192 (docs/journal/2026-12-01.md). 128
    # is DeepSeek-V3's N_C.
    # 0 leaves Triton's default.
    promote_k: int = 0

    def launch_options(self, target: Target) -> dict[str, Any]:
        return compat.triton_launch_options(self, target)


# Static figures of the AOT code objects (Triton 3.7.1, 2026-12-06) noted per config.
# sm_90a: 128x128x128 with promotion every 128 K: the wgmma partial sum and the fp32 sum
# each hold a 128x128 tile, 164 registers, no spills, 4 stages = 129 KB of shared memory.
# (128x256 took 195 registers without promotion but 255 and 192 bytes of spills with it.)
# gfx942: 256x256x128 is 64 KB a stage = all of the LDS, so the stream pipeliner's 2 stages
# (one tile in LDS, the next in registers) is the most it can take; 16x16x32 fp8 MFMA,
# 228 VGPRs, no spills, occupancy 2. CDNA3's fp8 MFMA accumulates in fp32: no promotion.
DEFAULTS = {
    "sm_90a": Config(BM=128, BN=128, BK=128, GROUP_M=8, num_warps=8, num_stages=4,
                     promote_k=128),
    "gfx942": Config(BM=256, BN=256, BK=128, GROUP_M=4, num_warps=8, num_stages=2,
                     waves_per_eu=0, matrix_instr_nonkdim=16),
    # gfx950 (OCP e4m3): gfx942's tile spilled there (256 VGPRs, 25 spills, 104 B of
    # scratch); BK 64 with 3 stages (two 32 KB buffers of the 160 KB LDS): 208 VGPRs, no
    # spills, 2 waves (Triton 3.7.1 code objects, 2026-12-07; never timed: no gfx950 here)
    "gfx950": Config(BM=256, BN=256, BK=64, GROUP_M=4, num_warps=8, num_stages=3,
                     waves_per_eu=0, matrix_instr_nonkdim=16),
}
# Decode-sized M: narrow in M (64 is the smallest wgmma M), long in K, and N tiles of 32 so
# that N=8192 gives 256 programs: two per SM on sm_90a (97 KB shared each), and most of
# the 304 CUs on gfx942. The weight stream is the whole cost.
SMALL_M = {
    "sm_90a": Config(BM=64, BN=32, BK=256, GROUP_M=1, num_warps=4, num_stages=4,
                     promote_k=128),
    "gfx942": Config(BM=16, BN=32, BK=256, GROUP_M=1, num_warps=4, num_stages=2,
                     waves_per_eu=0, matrix_instr_nonkdim=16),
}


def default_config(case: Case, target: Target) -> Config:
    table = SMALL_M if case.dims["M"] <= 64 else DEFAULTS
    return target.pick(table)


@triton.jit
def fp8_matmul_kernel(a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr, M, N, K,
                      stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      GROUP_M: tl.constexpr, PROMOTE_K: tl.constexpr):
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BM, BN, GROUP_M)

    # Wrapped indices keep every load in bounds; the store masks the wrapped rows/columns.
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
        if PROMOTE_K > 0:
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=PROMOTE_K)
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk

    # Scales are contiguous [M, 1] and [1, N]: element i of each is at offset i.
    a_scale = tl.load(a_scale_ptr + rm)
    b_scale = tl.load(b_scale_ptr + rn)
    acc = acc * a_scale[:, None] * b_scale[None, :]

    cm = pid_m * BM + tl.arange(0, BM)
    cn = pid_n * BN + tl.arange(0, BN)
    c_ptrs = c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))


def _check_operands(a, b, a_scale, b_scale) -> None:
    M, K = a.shape
    K_b, N = b.shape
    problems = []
    if K_b != K:
        problems.append(f"a is {tuple(a.shape)} but b is {tuple(b.shape)}")
    if tuple(a_scale.shape) != (M, 1) or not a_scale.is_contiguous():
        problems.append(f"a_scale must be contiguous [{M}, 1], got {tuple(a_scale.shape)}")
    if tuple(b_scale.shape) != (1, N) or not b_scale.is_contiguous():
        problems.append(f"b_scale must be contiguous [1, {N}], got {tuple(b_scale.shape)}")
    if problems:
        raise ValueError("kernels/fp8_gemm/triton_fp8_gemm: " + "; ".join(problems))


def matmul(a, b, a_scale, b_scale, cfg: Config, target: Target | None = None):
    import torch

    _check_operands(a, b, a_scale, b_scale)
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    grid = (triton.cdiv(M, cfg.BM) * triton.cdiv(N, cfg.BN),)
    opts = cfg.launch_options(target) if target is not None else {
        "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    fp8_matmul_kernel[grid](a, b, c, a_scale, b_scale, M, N, K,
                            *a.stride(), *b.stride(), *c.stride(),
                            BM=cfg.BM, BN=cfg.BN, BK=cfg.BK, GROUP_M=cfg.GROUP_M,
                            PROMOTE_K=cfg.promote_k, **opts)
    return c


def build(case: Case, dtype: str, target: Target, **overrides: Any) -> Build:
    check_dtype(dtype)
    cfg = replace(default_config(case, target), **overrides)
    return Build(fn=lambda a, b, sa, sb: matmul(a, b, sa, sb, cfg, target),
                 config=asdict(cfg) | {"fp8": fp8_format(target).torch_name})


# What a launch on make_inputs' tensors specializes on: 16-byte aligned base pointers, and
# sizes and strides divisible by 16 (every real case; the decode M=16 too).
ALIGNED_ARGS = ("a_ptr", "b_ptr", "c_ptr", "a_scale_ptr", "b_scale_ptr", "M", "N", "K",
                "stride_am", "stride_bn", "stride_cm")


def aot_signature(dtype: str, target: Target) -> tuple[dict[str, str], dict[str, Any]]:
    """The signature a launch with ``make_inputs``' layouts specializes to.

    The JIT turns integer arguments equal to 1 into constants; A's and B's unit K strides
    are given as such here, so the ahead-of-time code has the same contiguous K loads.
    """
    fp8, out = compat.triton_dtype(fp8_format(target).name), compat.triton_dtype(OUT_DTYPE)
    signature = {"a_ptr": f"*{fp8}", "b_ptr": f"*{fp8}", "c_ptr": f"*{out}",
                 "a_scale_ptr": "*fp32", "b_scale_ptr": "*fp32",
                 **{name: "i32" for name in ("M", "N", "K", "stride_am", "stride_bn",
                                              "stride_cm")},
                 "stride_ak": "constexpr", "stride_bk": "constexpr", "stride_cn": "constexpr",
                 "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "GROUP_M": "constexpr",
                 "PROMOTE_K": "constexpr"}
    return signature, {"stride_ak": 1, "stride_bk": 1, "stride_cn": 1}


def aot(case: Case, dtype: str, target: Target, **overrides: Any) -> dict[str, Any]:
    check_dtype(dtype)
    cfg = replace(default_config(case, target), **overrides)
    signature, unit_strides = aot_signature(dtype, target)
    constexprs = {"BM": cfg.BM, "BN": cfg.BN, "BK": cfg.BK, "GROUP_M": cfg.GROUP_M,
                  "PROMOTE_K": cfg.promote_k,
                  **unit_strides}
    compiled = compat.triton_aot_aligned(fp8_matmul_kernel, signature, constexprs, target,
                                         cfg.launch_options(target), aligned=ALIGNED_ARGS)
    return compat.triton_artifacts(compiled) | {
        "config": asdict(cfg) | {"fp8": fp8_format(target).torch_name},
        "threads": cfg.num_warps * target.warp_size}
