"""Triton flash-attention forward in the style of Triton's fused-attention tutorial (06).

Online softmax in the log2 domain (exp2 with log2(e) folded into the scale). A causal
q-block runs two loops: the kv blocks left of the diagonal with no mask at all, then the
diagonal block(s) with the causal mask. A non-causal q-block runs the full kv blocks
unmasked and one masked tail block when S is not a multiple of BLOCK_N. GQA: query head
h reads kv head h // GROUP.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import triton
import triton.language as tl

from kperf.ops import Build, Case, Target, compat

from .spec import check_dims

LOG2E = 1.4426950408889634


@dataclass(frozen=True)
class Config:
    BLOCK_M: int
    BLOCK_N: int
    num_warps: int
    num_stages: int
    # AMD only: occupancy hint and MFMA shape (16x16 is the fast fp16/bf16 MFMA on CDNA3)
    waves_per_eu: int = 0
    matrix_instr_nonkdim: int = 0

    def launch_options(self, target: Target) -> dict[str, Any]:
        return compat.triton_launch_options(self, target)


# sm_90a: 128-row q-blocks over 8 warps (two wgmma warpgroups), 3 cp.async stages of K/V.
# d=128 takes 64-wide kv blocks (129 KB shared, 185 registers in the AOT cubin): 128-wide
# ones need 225 KB and 255 registers. d=64 takes 128-wide kv blocks (113 KB, 204 registers).
# gfx942: 128x64 blocks, no software pipelining (num_stages=1, as ROCm's flash-attention
# configs). d=128 runs 8 wave64s: with 4 the Q, S and O fragments need 256+ VGPRs and spill
# (42 spills at waves_per_eu=2), with 8 they take 198 VGPRs at occupancy 2. d=64: 4 waves,
# 186 VGPRs.
DEFAULTS = {
    ("sm_90a", 128): Config(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3),
    ("sm_90a", 64): Config(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=3),
    ("gfx942", 128): Config(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=1,
                            waves_per_eu=2, matrix_instr_nonkdim=16),
    ("gfx942", 64): Config(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=1,
                           waves_per_eu=2, matrix_instr_nonkdim=16),
}


def default_config(case: Case, target: Target) -> Config:
    head_dim = check_dims(case)["D"]
    try:
        return target.pick(DEFAULTS, head_dim)
    except KeyError:
        raise ValueError(f"attention/{case.name}: no Triton config for {target.name} with "
                         f"head_dim {head_dim}; have {sorted(DEFAULTS)}") from None


@triton.jit
def _attn_inner(acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_vs, offs_m, offs_n, offs_d,
                qk_scale, lo, hi, SEQ, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                BLOCK_N: tl.constexpr):
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n
        k_ptrs = k_base + cols[:, None] * stride_ks + offs_d[None, :]
        v_ptrs = v_base + cols[:, None] * stride_vs + offs_d[None, :]
        k = tl.load(k_ptrs, mask=cols[:, None] < SEQ, other=0.0) if MASKED else tl.load(k_ptrs)
        qk = tl.dot(q, tl.trans(k))
        if MASKED:
            keep = cols[None, :] < SEQ
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= cols[None, :])
            qk = tl.where(keep, qk * qk_scale, float("-inf"))
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_ptrs, mask=cols[:, None] < SEQ, other=0.0) if MASKED else tl.load(v_ptrs)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def attn_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, qk_scale,
                    stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
                    stride_vb, stride_vh, stride_vs, stride_ob, stride_oh, stride_os,
                    H_Q, GROUP, SEQ,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    batch = pid_bh // H_Q
    head = pid_bh % H_Q
    kv_head = head // GROUP
    q_base = q_ptr + batch * stride_qb + head * stride_qh
    k_base = k_ptr + batch * stride_kb + kv_head * stride_kh
    v_base = v_ptr + batch * stride_vb + kv_head * stride_vh
    o_base = o_ptr + batch * stride_ob + head * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m[:, None] < SEQ
    q = tl.load(q_base + offs_m[:, None] * stride_qs + offs_d[None, :], mask=row_ok, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        # Keys left of this q-block are visible to every row: no mask (BLOCK_M % BLOCK_N == 0).
        diagonal = start_m * BLOCK_M
        end = tl.minimum(diagonal + BLOCK_M, SEQ)
    else:
        diagonal = (SEQ // BLOCK_N) * BLOCK_N  # the full kv blocks, then a ragged tail
        end = SEQ
    acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_vs,
                                offs_m, offs_n, offs_d, qk_scale, 0, diagonal, SEQ,
                                False, CAUSAL, BLOCK_N)
    acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_vs,
                                offs_m, offs_n, offs_d, qk_scale, diagonal, end, SEQ,
                                True, CAUSAL, BLOCK_N)
    out = acc / l_i[:, None]
    tl.store(o_base + offs_m[:, None] * stride_os + offs_d[None, :],
             out.to(o_ptr.dtype.element_ty), mask=row_ok)


def _check_layout(name: str, **tensors) -> None:
    for label, t in tensors.items():
        if t.dim() != 4 or t.stride(-1) != 1:
            raise ValueError(f"attention/{name}: {label} must be (B, H, S, D) with a contiguous "
                             f"last dim, got shape {tuple(t.shape)} stride {t.stride()}")


def attention(q, k, v, causal: bool, cfg: Config, target: Target | None = None,
              name: str = "attention"):
    import torch

    _check_layout(name, q=q, k=k, v=v)
    batch, q_heads, seq, head_dim = q.shape
    o = torch.empty_like(q)
    grid = (triton.cdiv(seq, cfg.BLOCK_M), batch * q_heads)
    opts = cfg.launch_options(target) if target is not None else {
        "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    attn_fwd_kernel[grid](q, k, v, o, head_dim ** -0.5 * LOG2E,
                          *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
                          q_heads, q_heads // k.shape[1], seq,
                          HEAD_DIM=head_dim, BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N,
                          CAUSAL=causal, **opts)
    return o


def _config(case: Case, target: Target, overrides: dict[str, Any]) -> Config:
    cfg = replace(default_config(case, target), **overrides)
    if cfg.BLOCK_M % cfg.BLOCK_N:
        raise ValueError(f"attention/{case.name}: BLOCK_M={cfg.BLOCK_M} must be a multiple of "
                         f"BLOCK_N={cfg.BLOCK_N} (the causal split assumes it)")
    return cfg


def build(case: Case, dtype: str, target: Target, **overrides: Any) -> Build:
    cfg = _config(case, target, overrides)
    causal = bool(case.dims["causal"])

    def run(q, k, v, is_causal: bool):
        if is_causal != causal:
            raise ValueError(f"attention/{case.name}: built causal={causal}, called {is_causal}")
        return attention(q, k, v, causal, cfg, target, case.name)

    return Build(fn=run, config=asdict(cfg))


def _launch_ints(case: Case) -> dict[str, int]:
    """The integer arguments a launch on contiguous BHSD tensors of this case passes."""
    d = check_dims(case)
    seq, dim = d["S"], d["D"]
    q_strides = (d["Hq"] * seq * dim, seq * dim, dim)
    kv_strides = (d["Hkv"] * seq * dim, seq * dim, dim)
    values = {}
    for prefix, strides in (("q", q_strides), ("k", kv_strides), ("v", kv_strides),
                            ("o", q_strides)):
        values.update(zip((f"stride_{prefix}b", f"stride_{prefix}h", f"stride_{prefix}s"),
                          strides, strict=True))
    return values | {"H_Q": d["Hq"], "GROUP": d["Hq"] // d["Hkv"], "SEQ": seq}


def aot(case: Case, dtype: str, target: Target, **overrides: Any) -> dict[str, Any]:
    """Compiled with the divisibility a launch of this case would specialise on."""
    cfg = _config(case, target, overrides)
    d = check_dims(case)
    t = compat.triton_dtype(dtype)
    ints = _launch_ints(case)
    pointers = ("q_ptr", "k_ptr", "v_ptr", "o_ptr")
    signature = {**dict.fromkeys(pointers, f"*{t}"), "qk_scale": "fp32",
                 **dict.fromkeys(ints, "i32"),
                 **dict.fromkeys(("HEAD_DIM", "BLOCK_M", "BLOCK_N", "CAUSAL"), "constexpr")}
    constexprs = {"HEAD_DIM": d["D"], "BLOCK_M": cfg.BLOCK_M, "BLOCK_N": cfg.BLOCK_N,
                  "CAUSAL": bool(d["causal"])}
    aligned = pointers + tuple(name for name, value in ints.items() if value % 16 == 0)
    compiled = compat.triton_aot_aligned(attn_fwd_kernel, signature, constexprs, target,
                                         cfg.launch_options(target), aligned)
    return compat.triton_artifacts(compiled) | {"config": asdict(cfg),
                                                "threads": cfg.num_warps * target.warp_size}
