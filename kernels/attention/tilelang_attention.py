"""TileLang flash-attention forward in the style of TileLang's examples/flash_attention.

One block per (q-block, query head, batch). Q stays in shared memory; K and V blocks
are pipelined through it; S = Q K^T and O += P V run on the tensor cores (wgmma / MFMA)
with the online softmax on fragments in between, in the log2 domain. GQA: query head h
reads kv head h // group. The causal loop stops at the diagonal block.
"""

# No ``from __future__ import annotations`` here: TileLang evaluates the prim_func's
# argument annotations against the closure, which only holds names the body uses.
from dataclasses import asdict, dataclass, replace
from typing import Any

from kperf.ops import Build, Case, Target, Unsupported, compat

from .spec import check_dims

TL_DTYPE = compat.TILELANG_DTYPE
LOG2E = 1.4426950408889634


@dataclass(frozen=True)
class Config:
    block_M: int
    block_N: int
    num_stages: int
    threads: int
    k_pack: int = 1  # AMD MFMA K packing for Q K^T (ROCm dialect only)
    o_via_shared: bool = True  # stage O through shared memory for a coalesced (TMA) store


# sm_90a: 128x128 blocks, 2 stages of K/V, 256 threads, as the examples' Hopper config;
# with d=128: Q 32 KB + 2 x (K 32 + V 32) KB = 160 KB (O reuses Q's buffer), + 2 KB static
# = 162 KB of the 227 KB (code object, 2026-12-06).
# gfx942: 4 wave64s; the 64 KB LDS holds Q (128 x d), one K and one V block and 2 KB of
# reduction workspace: 64-row kv blocks for d=64 (16 + 8 + 8 + 2 = 34 KB), 32-row ones for
# d=128 (32 + 8 + 8 + 2 = 50 KB; 64 rows take 66 KB: cannot launch). One block per CU,
# occupancy 1, limited by LDS (code object, clang19, 2026-12-06). O is written straight from
# registers: staging it would reuse Q's LDS, but take 12 (d=128) / 8 (d=64) more VGPRs.
DEFAULTS = {
    ("sm_90a", 128): Config(block_M=128, block_N=128, num_stages=2, threads=256),
    ("sm_90a", 64): Config(block_M=128, block_N=128, num_stages=2, threads=256),
    ("gfx942", 128): Config(block_M=128, block_N=32, num_stages=1, threads=256, k_pack=2,
                            o_via_shared=False),
    ("gfx942", 64): Config(block_M=128, block_N=64, num_stages=1, threads=256, k_pack=2,
                           o_via_shared=False),
}
# Every sequence length must be a whole number of blocks (no edge masking in this kernel).
SEQ_MULTIPLE = max(max(c.block_M, c.block_N) for c in DEFAULTS.values())


def default_config(case: Case, target: Target) -> Config:
    head_dim = check_dims(case)["D"]
    try:
        return target.pick(DEFAULTS, head_dim)
    except KeyError:
        raise ValueError(f"attention/{case.name}: no TileLang config for {target.name} with "
                         f"head_dim {head_dim}; have {sorted(DEFAULTS)}") from None


def flash_attention(batch: int, q_heads: int, kv_heads: int, seq: int, dim: int, causal: bool,
                    dtype: str, cfg: Config, target: Target):
    """Return the ``T.prim_func`` for one shape and configuration."""
    T = compat.tilelang_language(target)
    qk_gemm_kwargs = compat.tilelang_gemm_kwargs(target, cfg.k_pack)
    in_dtype, accum_dtype = TL_DTYPE[dtype], "float32"
    bM, bN = cfg.block_M, cfg.block_N
    group = q_heads // kv_heads
    scale = dim ** -0.5 * LOG2E  # exp(x * s) == exp2(x * s * log2(e)): one FMA per score
    q_shape, kv_shape = (batch, q_heads, seq, dim), (batch, kv_heads, seq, dim)

    @T.prim_func
    def attention(Q: T.Tensor(q_shape, in_dtype), K: T.Tensor(kv_shape, in_dtype),
                  V: T.Tensor(kv_shape, in_dtype), Output: T.Tensor(q_shape, in_dtype)):
        with T.Kernel(T.ceildiv(seq, bM), q_heads, batch, threads=cfg.threads) as (bx, by, bz):
            Q_shared = T.alloc_shared((bM, dim), in_dtype)
            K_shared = T.alloc_shared((bN, dim), in_dtype)
            V_shared = T.alloc_shared((bN, dim), in_dtype)
            acc_s = T.alloc_fragment((bM, bN), accum_dtype)
            acc_s_cast = T.alloc_fragment((bM, bN), in_dtype)
            acc_o = T.alloc_fragment((bM, dim), accum_dtype)
            scores_max = T.alloc_fragment((bM,), accum_dtype)
            scores_max_prev = T.alloc_fragment((bM,), accum_dtype)
            scores_scale = T.alloc_fragment((bM,), accum_dtype)
            scores_sum = T.alloc_fragment((bM,), accum_dtype)
            logsum = T.alloc_fragment((bM,), accum_dtype)

            T.copy(Q[bz, by, bx * bM:(bx + 1) * bM, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))
            kv_head = by // group
            loop_range = (T.min(T.ceildiv(seq, bN), T.ceildiv((bx + 1) * bM, bN))
                          if causal else T.ceildiv(seq, bN))

            for k in T.Pipelined(loop_range, num_stages=cfg.num_stages):
                T.copy(K[bz, kv_head, k * bN:(k + 1) * bN, :], K_shared)
                if causal:
                    for i, j in T.Parallel(bM, bN):
                        acc_s[i, j] = T.if_then_else(bx * bM + i >= k * bN + j, 0,
                                                     -T.infinity(accum_dtype))
                else:
                    T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow, **qk_gemm_kwargs)

                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum_dtype))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                # Keep the running max: a row fully masked in this block must not reset it.
                for i in T.Parallel(bM):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                for i in T.Parallel(bM):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(bM, bN):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(bM):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(bM, dim):
                    acc_o[i, j] *= scores_scale[i]

                T.copy(V[bz, kv_head, k * bN:(k + 1) * bN, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)

            for i, j in T.Parallel(bM, dim):
                acc_o[i, j] /= logsum[i]
            if cfg.o_via_shared:
                O_shared = T.alloc_shared((bM, dim), in_dtype)
                T.copy(acc_o, O_shared)
                T.copy(O_shared, Output[bz, by, bx * bM:(bx + 1) * bM, :])
            else:
                T.copy(acc_o, Output[bz, by, bx * bM:(bx + 1) * bM, :])

    return attention


def _config(case: Case, target: Target, overrides: dict[str, Any]) -> Config:
    cfg = replace(default_config(case, target), **overrides)
    seq = case.dims["S"]
    if seq % cfg.block_M or seq % cfg.block_N:
        raise Unsupported(f"attention/{case.name}: TileLang kernel needs S={seq} to be a "
                          f"multiple of block_M={cfg.block_M} and block_N={cfg.block_N}")
    return cfg


def _prim_func(case: Case, dtype: str, cfg: Config, target: Target):
    d = check_dims(case)
    return flash_attention(d["B"], d["Hq"], d["Hkv"], d["S"], d["D"], bool(d["causal"]), dtype,
                           cfg, target)


def build(case: Case, dtype: str, target: Target, **overrides: Any) -> Build:
    cfg = _config(case, target, overrides)
    kernel = compat.tilelang_compile(_prim_func(case, dtype, cfg, target))
    causal = bool(case.dims["causal"])

    def run(q, k, v, is_causal: bool):
        if is_causal != causal:
            raise ValueError(f"attention/{case.name}: built causal={causal}, called {is_causal}")
        return kernel(q, k, v)

    return Build(fn=run, config=asdict(cfg))


def aot(case: Case, dtype: str, target: Target, **overrides: Any) -> dict[str, Any]:
    """gfx942: HIP source only (no hipcc here); sm_90a: a full nvcc compile to a cubin."""
    cfg = _config(case, target, overrides)
    func = _prim_func(case, dtype, cfg, target)
    return compat.tilelang_artifacts(func, target) | {"config": asdict(cfg)}
