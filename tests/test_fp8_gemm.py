"""FP8 GEMM specifics: quantization and scales, the vendor e4m3 mapping, the reference math,
the torch baseline's path choice, and the bench parameters of the figure suites."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from kernels.fp8_gemm import reference as ref
from kernels.fp8_gemm import spec
from kperf.core import checks
from kperf.ops import compat
from kperf.ops.op import Case
from kperf.ops.registry import get_op
from kperf.ops.targets import GFX942, GFX950, SM90A

OP = get_op("fp8_gemm")
SMALL = Case("small", {"M": 48, "N": 80, "K": 96})
RTOL, ATOL = spec.TOLERANCE["fp8e4m3"]


@pytest.mark.parametrize("fmt", [spec.E4M3FN, spec.E4M3FNUZ], ids=lambda f: f.name)
def test_quantize_round_trip_within_half_step(fmt):
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(3)) * 5
    q, scale = ref.quantize_rows(x, fmt)
    assert q.dtype == fmt.torch_dtype() and scale.shape == (64, 1)
    # e4m3 keeps 3 mantissa bits: relative error <= 2^-4, plus half a subnormal step near 0.
    err = (ref.dequantize(q, scale) - x).abs()
    assert bool((err <= x.abs() * 2**-4 + scale * 2**-10).all()), float(err.max())
    # the largest magnitude of every row lands exactly on the format's largest value
    assert torch.equal(q.float().abs().amax(dim=1), torch.full((64,), fmt.max_value))
    assert torch.allclose(scale.squeeze(1), x.abs().amax(dim=1) / fmt.max_value)


def test_fnuz_needs_its_own_range():
    """448 (the fn maximum) is NaN in fnuz: scales must come from the target's format."""
    x = torch.tensor([[1.0, -2.0, 0.5]])
    assert torch.isnan(torch.tensor([448.0]).to(spec.E4M3FNUZ.torch_dtype()).float()).all()
    q, _ = ref.quantize_rows(x, spec.E4M3FNUZ)
    assert torch.isfinite(q.float()).all() and float(q.float().abs().max()) == 240.0


def test_zero_row_quantizes_to_zero_without_nan():
    x = torch.zeros(2, 16)
    x[1] = torch.linspace(-1, 1, 16)
    q, scale = ref.quantize_rows(x, spec.E4M3FN)
    assert float(scale[0]) == 1.0 and not q[0].float().any()
    assert torch.isfinite(ref.dequantize(q, scale)).all()


def test_quantize_rejects_non_fp32_input():
    with pytest.raises(ValueError, match="2-D fp32"):
        ref.quantize_rows(torch.zeros(4, 4, dtype=torch.float16), spec.E4M3FN)


def test_make_inputs_layouts_and_scales():
    a, b, a_scale, b_scale = OP.make_inputs(SMALL, "fp8e4m3", "cpu", 0)
    M, N, K = (SMALL.dims[k] for k in ("M", "N", "K"))
    assert a.dtype == b.dtype == torch.float8_e4m3fn
    assert a.shape == (M, K) and a.is_contiguous()
    assert b.shape == (K, N) and b.stride() == (1, K), "b must be the column-major w.t() view"
    assert a_scale.shape == (M, 1) and b_scale.shape == (1, N)
    assert a_scale.is_contiguous() and b_scale.is_contiguous()
    assert a_scale.dtype == b_scale.dtype == torch.float32
    # every row of A and every column of B uses the whole e4m3 range
    assert torch.equal(a.float().abs().amax(dim=1), torch.full((M,), 448.0))
    assert torch.equal(b.float().abs().amax(dim=0), torch.full((N,), 448.0))
    # gains spread the scales, so a kernel that drops or mixes up a scale is caught
    assert float(a_scale.max() / a_scale.min()) > 2 and float(b_scale.max() / b_scale.min()) > 2


def test_make_inputs_deterministic_per_seed():
    first, again, other = (OP.make_inputs(SMALL, "fp8e4m3", "cpu", s) for s in (0, 0, 1))
    assert all(torch.equal(x.float(), y.float()) for x, y in zip(first, again, strict=True))
    assert not torch.equal(first[0].float(), other[0].float())


def test_unknown_dtype_is_named():
    with pytest.raises(ValueError, match=r"kernels/fp8_gemm.*'fp16'"):
        OP.make_inputs(SMALL, "fp16", "cpu", 0)


def test_vendor_fp8_mapping():
    nv, amd = spec.fp8_format(SM90A), spec.fp8_format(GFX942)
    assert (nv.torch_dtype(), nv.max_value, nv.tilelang_name) == (
        torch.float8_e4m3fn, 448.0, "float8_e4m3")
    assert (amd.torch_dtype(), amd.max_value, amd.tilelang_name) == (
        torch.float8_e4m3fnuz, 240.0, "float8_e4m3fnuz")
    assert compat.triton_dtype(nv.name) == "fp8e4nv"
    assert compat.triton_dtype(amd.name) == "fp8e4b8"
    # CDNA4 is OCP e4m3fn like NVIDIA, named so for TileLang's MFMA table ("float8_e4m3"
    # has no entry there); CPU tensors are fn (the interpreter cannot load fnuz)
    cdna4 = spec.fp8_format(dataclasses.replace(GFX942, name="gfx950", arch="gfx950"))
    assert cdna4 is spec.fp8_format(GFX950) is spec.E4M3FN_ROCM
    assert (cdna4.torch_dtype(), cdna4.max_value, cdna4.tilelang_name, cdna4.name) == (
        torch.float8_e4m3fn, 448.0, "float8_e4m3fn", nv.name)
    assert spec.fp8_format_for_device("cpu") is spec.E4M3FN


@pytest.mark.parametrize(("target", "pointer"), [(SM90A, "*fp8e4nv"), (GFX942, "*fp8e4b8")])
def test_triton_aot_signature_uses_target_fp8(target, pointer):
    from kernels.fp8_gemm import triton_fp8_gemm

    signature, constants = triton_fp8_gemm.aot_signature("fp8e4m3", target)
    assert signature["a_ptr"] == signature["b_ptr"] == pointer
    assert signature["c_ptr"] == "*bf16" and signature["a_scale_ptr"] == "*fp32"
    assert all(signature[name] == "constexpr" for name in constants)


def test_real_cases_match_the_aot_alignment_assumption():
    """The Triton AOT marks M, N, K and the strides divisible by 16, as the JIT would see them."""
    from kernels.fp8_gemm import triton_fp8_gemm

    assert {"M", "N", "K"} <= set(triton_fp8_gemm.ALIGNED_ARGS)
    ragged = [c.name for c in OP.cases if any(v % 16 for v in c.dims.values())]
    assert not ragged, f"cases the AOT figures would misdescribe: {ragged}"


def test_reference_is_dequantized_product():
    inputs = OP.make_inputs(SMALL, "fp8e4m3", "cpu", 0)
    a, b, a_scale, b_scale = inputs
    exact = ref.dequantize(a, a_scale).double() @ ref.dequantize(b.t(), b_scale.t()).double().t()
    got = OP.reference(*inputs)
    assert got.dtype == torch.float32
    assert torch.allclose(got.double(), exact, rtol=1e-5, atol=1e-6)


def test_tolerance_catches_a_missing_or_swapped_scale():
    a, b, a_scale, b_scale = OP.make_inputs(SMALL, "fp8e4m3", "cpu", 0)
    want = OP.reference(a, b, a_scale, b_scale)
    checks.compare(want.to(torch.bfloat16), want, RTOL, ATOL, "bf16 rounding passes")
    no_row_scale = (a.float() @ b.float()) * b_scale
    reversed_cols = OP.reference(a, b, a_scale, b_scale.flip(1))
    for wrong in (no_row_scale, reversed_cols):
        with pytest.raises(checks.WrongResult):
            checks.compare(wrong, want, RTOL, ATOL, "wrong scaling")


def test_torch_baseline_uses_scaled_mm_when_it_can():
    build = ref.torch_build(SMALL, "fp8e4m3", "cpu")
    assert build.config["library"] == "torch._scaled_mm", build.config
    inputs = OP.make_inputs(SMALL, "fp8e4m3", "cpu", 0)
    out = build.fn(*inputs)
    assert out.dtype == torch.bfloat16
    checks.compare(out, OP.reference(*inputs), RTOL, ATOL, "torch._scaled_mm on cpu")


def test_torch_baseline_falls_back_and_says_why():
    ragged = Case("ragged", {"M": 40, "N": 32, "K": 72})  # M, K not multiples of 16
    build = ref.torch_build(ragged, "fp8e4m3", "cpu")
    assert build.config["library"].startswith("dequantize + torch.matmul")
    assert "M/K" in build.config["why_not_scaled_mm"]
    inputs = OP.make_inputs(ragged, "fp8e4m3", "cpu", 0)
    checks.compare(build.fn(*inputs), OP.reference(*inputs), RTOL, ATOL, "fallback")


def test_triton_wrapper_rejects_1d_scales():
    from kernels.fp8_gemm import triton_fp8_gemm

    a, b, a_scale, b_scale = OP.make_inputs(SMALL, "fp8e4m3", "cpu", 0)
    cfg = triton_fp8_gemm.default_config(SMALL, SM90A)
    with pytest.raises(ValueError, match=r"a_scale must be contiguous \[48, 1\]"):
        triton_fp8_gemm.matmul(a, b, a_scale.squeeze(1), b_scale, cfg)


def test_figure_and_compile_suites_use_fp8_dtype():
    from benchmarks import bench_fp8_gemm
    from kperf.suites.cpu import _CompileTime, _StaticFigure

    expected = {"Fp8GemmRegisters", "Fp8GemmScratch", "Fp8GemmSharedMem", "Fp8GemmOccupancy",
                "Fp8GemmCompile", "Fp8GemmTime"}
    classes = {name: obj for name, obj in vars(bench_fp8_gemm).items() if isinstance(obj, type)}
    assert expected <= set(classes)
    for name, cls in classes.items():
        if issubclass(cls, (_StaticFigure, _CompileTime)):
            assert cls.__name__ == name, "asv looks a suite up by the name it was given"
            targets, dtypes, backends = cls.params
            assert list(dtypes) == list(OP.dtypes), name
            assert set(targets) == {"gfx942", "gfx950", "sm_90a"}
            assert set(backends) <= set(OP.backends)
            assert cls.op == "fp8_gemm" and OP.case(cls.case), name


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["tilelang", "triton", "torch"])
@pytest.mark.parametrize("case", [Case("gpu-mid", {"M": 512, "N": 1024, "K": 2048}),
                                  OP.case("llama3-70b.down_proj.decode16")], ids=lambda c: c.name)
def test_backend_on_gpu(backend, case):
    from kperf.ops.targets import current_device_target

    target = current_device_target()
    inputs = OP.make_inputs(case, "fp8e4m3", "cuda", 0)
    assert inputs[0].dtype == spec.fp8_format(target).torch_dtype()
    build = OP.backends[backend].build(case, "fp8e4m3", target)
    out = build.fn(*inputs)
    assert out.dtype == torch.bfloat16
    checks.compare(out, OP.reference(*inputs), RTOL, ATOL, f"fp8_gemm/{case.name}/{backend}")
    if backend == "torch" and torch.version.cuda:
        assert build.config["library"] == "torch._scaled_mm", build.config


@pytest.mark.parametrize("case_name", ["llama3-70b.qkv_proj", "llama3-70b.down_proj.decode16"])
def test_sm90a_kernels_promote_fp8_partial_sums(case_name):
    """Hopper's fp8 accumulator is not fp32: without promotion both kernels failed the
    fp32-reference check on an H200 (docs/journal/2026-12-01.md). CDNA3's fp8 MFMA needs none."""
    from kernels.fp8_gemm import tilelang_fp8_gemm, triton_fp8_gemm
    from kperf.ops.targets import GFX942

    case = OP.case(case_name)
    tr = triton_fp8_gemm.default_config(case, SM90A)
    assert 0 < tr.promote_k <= tr.BK
    assert triton_fp8_gemm.default_config(case, GFX942).promote_k == 0
    assert tilelang_fp8_gemm.default_config(case, SM90A).promote
    assert not tilelang_fp8_gemm.default_config(case, GFX942).promote
    source = OP.backend("tilelang").aot(case, "fp8e4m3", SM90A)["source"]
    assert "C_block" in source  # the per-K-block fragment survives lowering
