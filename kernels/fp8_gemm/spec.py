"""FP8 GEMM with row-wise scales: C = (A_fp8 @ B_fp8) * a_scale * b_scale, output bf16.

Operands and scales, as ``make_inputs`` returns them:

- ``a``: [M, K] fp8 e4m3, row-major (activations, quantized per token);
- ``b``: [K, N] fp8 e4m3, column-major: the [N, K] weight of a linear layer, transposed as a
  view (``w.t()``), which is what ``torch._scaled_mm`` and the fp8 MMAs want (K-major B);
- ``a_scale``: [M, 1] fp32, one scale per row of A;
- ``b_scale``: [1, N] fp32, one scale per output column (per weight row).

The op's dtype parameter names the *input* format: ``"fp8e4m3"``. Accumulation is fp32 and
the output is bf16 (``OUT_DTYPE``): the fp8 products summed over K overflow fp16's range.

e4m3 is two formats, chosen per vendor: NVIDIA (and AMD gfx950) use OCP ``e4m3fn`` (max 448);
AMD gfx942 (MI300) uses ``e4m3fnuz`` (exponent bias 8, max 240, no negative zero). The scales
are amax / (the format's max), so each format uses its own full range.

Cases are FP8-serving layers: Llama-3 70B (hidden 8192, MLP 28672) and DeepSeek-V3's dense
MLP layers (hidden 7168, intermediate 18432; DeepSeek-V3 is trained in FP8), at prefill batch
sizes, plus one decode-sized case that streams the weight and is bandwidth-bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from kperf.ops import DTYPE_BYTES, Case, Target

CASES = (
    # Llama-3 70B: 64 q heads + 8 kv heads of 128 -> 8192 + 2*1024 outputs; 4096 tokens
    Case("llama3-70b.qkv_proj", {"M": 4096, "N": 10240, "K": 8192}, "8192 + 2*8*128 outputs",
         pr=True),
    Case("llama3-70b.down_proj", {"M": 8192, "N": 8192, "K": 28672}, "8192 tokens"),
    # DeepSeek-V3's first three layers are dense: up (and gate) 7168 -> 18432, down back
    Case("deepseek-v3.dense_up_proj", {"M": 4096, "N": 18432, "K": 7168}),
    Case("deepseek-v3.dense_down_proj", {"M": 4096, "N": 7168, "K": 18432}),
    # decode: 16 sequences, one token each; the 235 MB fp8 weight dominates the traffic
    Case("llama3-70b.down_proj.decode16", {"M": 16, "N": 8192, "K": 28672}, "bandwidth-bound",
         klass="decode"),
)

DTYPES = ("fp8e4m3",)
OUT_DTYPE = "bf16"

# CPU tests under the Triton interpreter: ragged edges in M, N and K (none a tile multiple).
TEST_CASES = (
    Case("test-ragged", {"M": 96, "N": 80, "K": 200}),
    Case("test-small-m", {"M": 8, "N": 64, "K": 160}),
)

# The reference is exact fp32 math on the dequantized operands, so the error is fp32
# accumulation order (~1e-6) plus the bf16 rounding of the output (2^-9 relative; the
# Triton interpreter truncates instead, up to 2^-8). A wrong or missing scale is off by
# far more: the test data gives rows and columns gains spread over e^[-1, 1].
TOLERANCE = {"fp8e4m3": (1e-2, 1e-2)}


@dataclass(frozen=True)
class Fp8Format:
    """One e4m3 encoding and its name in each library."""

    name: str  # key for compat.triton_dtype: "fp8e4m3" (OCP fn) | "fp8e4m3fnuz"
    torch_name: str  # attribute of the torch module
    tilelang_name: str  # TileLang dtype string
    max_value: float  # largest finite value: the quantization range

    def torch_dtype(self):
        import torch

        return getattr(torch, self.torch_name)


# TileLang's "float8_e4m3" is OCP e4m3fn on CUDA; its MFMA emitter for ROCm needs the
# explicit "float8_e4m3fnuz" or "float8_e4m3fn" (it has no MFMA mapping for plain
# "float8_e4m3": TileLang 0.1.15's gfx950 lowering stopped at KeyError there).
E4M3FN = Fp8Format("fp8e4m3", "float8_e4m3fn", "float8_e4m3", 448.0)
E4M3FN_ROCM = Fp8Format("fp8e4m3", "float8_e4m3fn", "float8_e4m3fn", 448.0)
E4M3FNUZ = Fp8Format("fp8e4m3fnuz", "float8_e4m3fnuz", "float8_e4m3fnuz", 240.0)


def _is_fnuz_arch(arch: str) -> bool:
    # CDNA3 (gfx940/941/942) implements only the fnuz variants; CDNA4 (gfx950) is OCP.
    return arch.split(":")[0].startswith("gfx94")


def fp8_format(target: Target) -> Fp8Format:
    """The e4m3 encoding a target's matrix cores consume."""
    if target.vendor != "amd":
        return E4M3FN
    return E4M3FNUZ if _is_fnuz_arch(target.arch) else E4M3FN_ROCM


def fp8_format_for_device(device: str) -> Fp8Format:
    """The e4m3 encoding for tensors made on ``device``.

    CPU tensors are OCP e4m3fn: the Triton interpreter cannot load fnuz ("fail to convert
    fp8e4b8 to ir type" on Triton 3.7.1), and fn is what CPU tests compare against.
    """
    import torch

    if not str(device).startswith("cuda") or not torch.version.hip:
        return E4M3FN
    index = torch.device(device).index
    if index is None:
        index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    return E4M3FNUZ if _is_fnuz_arch(props.gcnArchName) else E4M3FN_ROCM


def check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"kernels/fp8_gemm: dtype {dtype!r} is not an input format of this op; "
                         f"known: {DTYPES} (the output is always {OUT_DTYPE})")


def flops(case: Case) -> float:
    d = case.dims
    return 2.0 * d["M"] * d["N"] * d["K"]


def bytes_moved(case: Case, dtype: str) -> float:
    d = case.dims
    operands = DTYPE_BYTES[dtype] * (d["M"] * d["K"] + d["K"] * d["N"])
    return float(operands + DTYPE_BYTES[OUT_DTYPE] * d["M"] * d["N"] + 4 * (d["M"] + d["N"]))
