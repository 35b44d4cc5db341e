"""Attention specifics: the reference against SDPA's math, the GQA head mapping, the FLOP
and byte counts, the case table, and that the per-target tiles fit the hardware."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from kernels.attention import reference as ref
from kernels.attention import spec
from kperf.core import static
from kperf.ops.op import Case, Unsupported
from kperf.ops.registry import get_op
from kperf.ops.targets import GFX942, SM90A, TARGETS

OP = get_op("attention")


def _small(B=1, Hq=4, Hkv=2, S=48, D=16, causal=1) -> Case:
    return Case("small", {"B": B, "Hq": Hq, "Hkv": Hkv, "S": S, "D": D, "causal": causal})


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize(("Hq", "Hkv"), [(4, 4), (4, 2), (6, 1)])
def test_reference_equals_sdpa_math_in_fp32(causal, Hq, Hkv):
    q, k, v, is_causal = ref.make_inputs(_small(B=2, Hq=Hq, Hkv=Hkv, causal=causal), "fp32",
                                         "cpu", 5)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, enable_gqa=True)
    torch.testing.assert_close(ref.reference(q, k, v, is_causal), want, rtol=1e-5, atol=1e-5)


def test_causal_reference_first_row_is_first_value_row():
    q, k, v, _ = ref.make_inputs(_small(), "fp32", "cpu", 1)
    out = ref.reference(q, k, v, True)
    group = q.shape[1] // k.shape[1]
    for h in range(q.shape[1]):
        torch.testing.assert_close(out[0, h, 0], v[0, h // group, 0])  # only key 0 is visible
    assert not torch.allclose(out[0, 0, 1:], ref.reference(q, k, v, False)[0, 0, 1:])


def test_query_head_h_reads_kv_head_h_div_group():
    q, k, v, _ = ref.make_inputs(_small(Hq=8, Hkv=2, causal=0), "fp32", "cpu", 2)
    v = torch.stack([torch.full_like(v[:, 0], j + 1.0) for j in range(2)], dim=1)
    out = ref.reference(q, k, v, False)  # softmax rows sum to 1: each head returns its v value
    per_head = out.mean(dim=(0, 2, 3))
    torch.testing.assert_close(per_head, torch.tensor([1.0] * 4 + [2.0] * 4))


def test_flops_halve_for_causal_and_match_the_formula():
    for case in OP.cases:
        flipped = dataclasses.replace(case, dims={**case.dims, "causal": 1 - case.dims["causal"]})
        full, half = sorted((OP.flops(case), OP.flops(flipped)), reverse=True)
        assert half == full / 2, case.name
    # 4 * B * Hq * S^2 * D / 2 for Llama-3 8B at 4k, batch 2: 2^38
    assert OP.flops(OP.case("llama3-8b.prefill-4k")) == 4 * 2 * 32 * 4096**2 * 128 / 2
    assert OP.flops(OP.case("llama3-8b.prefill-4k")) == 2.0**38


def test_bytes_count_q_and_o_at_q_heads_and_k_and_v_at_kv_heads():
    case = OP.case("llama3-70b.prefill-8k")  # 64 q heads, 8 kv heads, 8192 x 128
    elements = 2 * 64 * 8192 * 128 + 2 * 8 * 8192 * 128
    assert OP.bytes_moved(case, "fp16") == OP.bytes_moved(case, "bf16") == 2 * elements


def test_cases_cover_the_shapes_the_kernels_claim():
    dims = [spec.check_dims(c) for c in OP.cases]
    assert all("." in c.name for c in OP.cases), "case names are model.layer"
    assert {d["D"] for d in dims} == {64, 128}
    assert {d["causal"] for d in dims} == {0, 1}
    assert {d["Hq"] == d["Hkv"] for d in dims} == {True, False}, "MHA and GQA"
    assert all(1024 <= d["S"] <= 16384 for d in dims)
    assert any(d["D"] == 64 and d["Hq"] > d["Hkv"] for d in dims), "GQA with d=64"
    assert OP.unsupported == {}, "every real case is a whole number of TileLang blocks"


def test_inputs_are_bhsd_and_carry_the_causal_flag():
    case = _small(B=2, Hq=6, Hkv=3, S=40, D=32, causal=0)
    q, k, v, causal = OP.make_inputs(case, "fp16", "cpu", 0)
    assert q.shape == (2, 6, 40, 32) and k.shape == v.shape == (2, 3, 40, 32)
    assert q.dtype == torch.float16 and causal is False
    assert torch.equal(q, OP.make_inputs(case, "fp16", "cpu", 0)[0])
    assert not torch.equal(q, OP.make_inputs(case, "fp16", "cpu", 1)[0])


@pytest.mark.parametrize(("dims", "field"), [({"Hq": 6, "Hkv": 4}, "Hkv=4"),
                                             ({"causal": 2}, "causal"),
                                             ({"D": None}, "lack")])
def test_bad_case_dims_name_the_case(dims, field):
    values = {**_small().dims, **dims}
    case = Case("bad-case", {k: v for k, v in values.items() if v is not None})
    with pytest.raises(ValueError, match=f"bad-case.*{field}"):
        OP.make_inputs(case, "fp16", "cpu", 0)


def test_tilelang_refuses_a_ragged_sequence():
    from kernels.attention import tilelang_attention

    case = _small(S=200, D=128)
    with pytest.raises(Unsupported, match=r"small.*S=200"):
        tilelang_attention.build(case, "fp16", SM90A)


def test_kernels_refuse_inputs_of_the_other_mask():
    case = _small(causal=1, D=64)
    built = OP.backend("triton").build(case, "fp16", GFX942)
    q, k, v, _ = OP.make_inputs(case, "fp16", "cpu", 0)
    with pytest.raises(ValueError, match="built causal=True"):
        built.fn(q, k, v, False)


def _representative(head_dim: int) -> Case:
    return next(c for c in OP.cases if c.dims["D"] == head_dim and c.dims["causal"])


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_tilelang_tiles_fit_shared_memory(target, head_dim):
    from kernels.attention import tilelang_attention as tla
    from kperf.ops import compat

    tgt, case = TARGETS[target], _representative(head_dim)
    cfg = tla.default_config(case, tgt)
    _, attrs = compat.tilelang_lower_source(tla._prim_func(case, "fp16", cfg, tgt), tgt)
    q_and_kv_tiles = 2 * head_dim * (cfg.block_M + 2 * cfg.block_N)
    assert q_and_kv_tiles <= attrs["shared_bytes"] <= tgt.shared_mem_bytes, attrs


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_triton_configs_fit_without_spilling(target, head_dim):
    from kernels.attention import triton_attention

    tgt, case = TARGETS[target], _representative(head_dim)
    artifacts = triton_attention.aot(case, "fp16", tgt)
    figures = static.figures(artifacts, tgt.vendor)
    cfg = artifacts["config"]
    assert figures["shared_bytes"] <= tgt.shared_mem_bytes, figures
    assert figures["scratch_bytes"] == 0 and figures.get("vgpr_spills", 0) == 0, figures
    if tgt.vendor == "nvidia":  # the aligned AOT compile is software-pipelined: K/V buffered
        one_kv_stage = 2 * head_dim * 2 * cfg["BLOCK_N"]
        assert figures["shared_bytes"] >= 2 * one_kv_stage + 2 * head_dim * cfg["BLOCK_M"]


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["tilelang", "triton", "torch"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_attention_is_correct_on_the_gpu(backend, dtype):
    from kperf.core.prepare import prepare
    from kperf.ops.targets import current_device_target

    for case in ("llama3-8b.prefill-1k", "sdxl-unet.attn1-64x64", "llama3.2-1b.prefill-8k"):
        p = prepare(OP, case, dtype, backend, current_device_target(), max_sets=2)
        assert p.agreement.mismatched == 0
        if backend == "torch":
            gqa = OP.case(case).dims["Hq"] > OP.case(case).dims["Hkv"]
            assert (p.config["gqa"] != "none (MHA)") == gqa, p.config
