"""gfx950 (MI350X / MI355X) as a target on the CPU: clang22 (the clang 22.1.8 of PyPI's
ziglang wheel) compiles TileLang's HIP source, Triton its own; the code-object figures of
kperf/core/codeobj.py against LLVM 22's own on real gfx950 code objects (the kernels of
tests/test_codeobj_llvm.py, and LDS sizes only gfx950 allows); ROCm 7.2.2's LLVM
disassembles what llvm-objdump-19 cannot; every op builds in both languages, without
spills (docs/amd.md, "gfx950"). No gfx950 GPU exists here: nothing of this was timed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kperf.core import codeobj, hip
from kperf.ops.targets import GFX942, GFX950, SM90A, Target
from tests.test_codeobj_llvm import KERNELS, OCCUPANCY, SOURCE, _lds, parse_remarks

GFX950_ONLY = "\n".join([
    _lds("lds_96k", "__launch_bounds__(256)", 24576),
    _lds("lds_160k", "__launch_bounds__(256)", 40960),
    """extern "C" __global__ void __launch_bounds__(64) mfma_gfx950(float* out, const _Float16* a) {
  typedef _Float16 half8 __attribute__((ext_vector_type(8)));
  typedef float float4_ __attribute__((ext_vector_type(4)));
  half8 x = *(const half8*)(a + threadIdx.x * 8);
  float4_ acc = {0, 0, 0, 0};
  acc = __builtin_amdgcn_mfma_f32_16x16x32_f16(x, x, acc, 0, 0, 0);
  *(float4_*)(out + threadIdx.x * 4) = acc;
}""",
])


def _clang22() -> hip.Toolchain:
    try:
        return hip.toolchain("clang22", "gfx950")
    except hip.ToolchainMissing as missing:
        pytest.skip(f"{missing} (tools/test.sh fetches it)")


Built = tuple[bytes, dict[str, dict[str, str]], dict[str, dict[str, int | str]]]


@pytest.fixture(scope="module")
def built() -> Built:
    out = hip.compile_hip(SOURCE + "\n" + GFX950_ONLY, arch="gfx950", chain=_clang22())
    notes = codeobj._run_tool("llvm-readelf", ["--notes"], out["hsaco"])
    metadata = {str(k["name"]): k for k in codeobj.parse_kernel_metadata(notes)}
    return out["hsaco"], parse_remarks(str(out["remarks"])), metadata


def test_every_figure_matches_llvm_22_on_gfx950(built: Built) -> None:
    """Every figure of every kernel equals LLVM 22's for gfx950 (the kernel's maximum
    work-group, static LDS, as LLVM assumes): the register file, SGPR table and wave slots
    are gfx942's, the LDS 160 KiB. One rule differs, and not by target: LLVM 22 no longer
    holds a CU to whole work-groups of 7 or 11 waves (it says 8 waves a SIMD, for gfx942
    too); kperf keeps LLVM 19's count, 4 groups of 7 waves = 7 a SIMD (docs/amd.md)."""
    assert set(built[1]) == set(built[2]) == KERNELS | {"lds_96k", "lds_160k", "mfma_gfx950"}
    assert codeobj.machine(built[0]) == ("gfx950", 160 * 1024)
    wrong = []
    for kernel, llvm in sorted(built[1].items()):
        ours = codeobj.kernel_figures(built[2][kernel], lds_per_cu=codeobj.machine(built[0])[1])
        vgprs, agprs = int(llvm["VGPRs"]), int(llvm["AGPRs"])
        want = {"occupancy": int(llvm[OCCUPANCY]), "sgprs": int(llvm["TotalSGPRs"]),
                "agprs": agprs, "registers": -(-vgprs // 4) * 4 + agprs if agprs else vgprs,
                "scratch_bytes": int(llvm["ScratchSize [bytes/lane]"]),
                "vgpr_spills": int(llvm["VGPRs Spill"]), "sgpr_spills": int(llvm["SGPRs Spill"]),
                "lds_static_bytes": int(llvm["LDS Size [bytes/block]"])}
        if ours["occupancy_limit"] == "work-groups":
            assert (ours["occupancy"], want.pop("occupancy")) in ((7, 8), (6, 8)), kernel
        wrong += [f"{kernel}.{key}: ours {ours[key]}, LLVM {value}"
                  for key, value in want.items() if ours[key] != value]
    assert not wrong, "\n".join(wrong)
    # the LDS rule is gfx950's own: two 64 KiB groups a CU (one on gfx942), one of 96 or
    # 160 KiB (none on gfx942), four of 40 KiB (one on gfx942)
    assert [int(built[1][k][OCCUPANCY]) for k in ("lds_64k", "lds_96k", "lds_160k", "lds_40k")
            ] == [2, 1, 1, 4]


def test_lds_over_160_kib_cannot_launch_on_gfx950(built: Built) -> None:
    """LLVM 22 refuses static LDS over 160 KiB for gfx950; a work-group whose static and
    dynamic LDS pass it cannot be resident (its gfx942 limit was 64 KiB)."""
    over = _lds("over", "__launch_bounds__(256)", 40961)
    refused = r"local memory \(163844\) exceeds limit \(163840\)"
    with pytest.raises(hip.CompileFailed, match=refused):
        hip.compile_hip("#include <hip/hip_runtime.h>\n" + over, arch="gfx950",
                        chain=_clang22())
    figures = codeobj.kernel_figures(built[2]["lds_160k"], dynamic_lds_bytes=4,
                                     lds_per_cu=160 * 1024)
    assert figures["occupancy"] == 0
    assert figures["occupancy_limit"] == \
        "LDS over 160 KiB a work-group (163844 bytes): cannot launch"


def test_gfx950_is_disassembled_by_an_llvm_that_knows_it(built: Built) -> None:
    """llvm-objdump-19 cannot decode gfx950's own instructions; ROCm 7.2.2's LLVM does, and
    on gfx942 code its text is llvm-objdump-19's, line for line (so gfx942's figures and
    digests do not move)."""
    try:
        library = hip.disassembler("gfx950")
    except hip.ToolchainMissing as missing:
        pytest.skip(str(missing))
    text = codeobj.disassemble(built[0], "gfx950")
    mfma = text.split("<mfma_gfx950>:")[1].split("\n<")[0]
    assert "v_mfma_f32_16x16x32_f16" in mfma and ".long" not in text
    assert codeobj.instruction_mix(mfma)["matrix"] == 1
    assert hip.disassembler("gfx942") is None
    gfx942 = hip.compile_hip(SOURCE, chain=hip.toolchain("clang19"))["hsaco"]
    with tempfile.NamedTemporaryFile(suffix=".hsaco") as f:
        f.write(gfx942)
        f.flush()
        script = Path(codeobj.__file__).with_name("amdgpu_disasm.py")
        llvm22 = subprocess.run([sys.executable, str(script), str(library), f.name, "--mcpu",
                                 "gfx942"], capture_output=True, text=True, check=True).stdout

    def lines(text: str) -> list[str]:
        return [" ".join(line.split("//")[0].split()) for line in text.splitlines()
                if line.startswith(("\t", " ")) and line.strip()]

    objdump19 = codeobj.disassemble(gfx942, "gfx942")
    assert lines(llvm22) == lines(objdump19) and len(lines(objdump19)) > 500


def test_the_toolchains_of_gfx950(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """clang19 and llvm19 compile gfx950 as clang22 (LLVM 19 has no gfx950) and the records
    say so; a ROCm release whose LLVM cannot read clang 22's IR is refused by name and
    reason before any compile."""
    assert hip.chain_for("clang19", "gfx950") == hip.chain_for("llvm19", "gfx950") == "clang22"
    assert hip.chain_for("clang19", "gfx942") == "clang19"
    assert hip.chain_for("rocm-7.2.2", "gfx950") == "rocm-7.2.2"
    monkeypatch.setenv(hip.TOOLCHAIN_ENV, "llvm19")
    assert (hip.toolchain_name("gfx950"), hip.toolchain_name("gfx942")) == ("clang22", "llvm19")
    monkeypatch.setenv(hip.ROOT_ENV, str(tmp_path))
    (tmp_path / "rocm-7.0.2").mkdir()
    (tmp_path / "rocm-7.0.2" / "toolchain.json").write_text(
        json.dumps({"llvm_version": "20.0.0git"}))
    with pytest.raises(hip.ToolchainMissing, match=r"rocm-7.0.2 cannot compile gfx950 here: "
                                                   r"its LLVM 20.0.0git cannot read the IR"):
        hip.toolchain("rocm-7.0.2", "gfx950")
    assert hip.toolchain("rocm-7.0.2", "gfx942").kit is None
    with pytest.raises(hip.ToolchainMissing, match="kperf toolchain fetch clang22"):
        hip.toolchain("clang19", "gfx950")


def test_a_target_takes_its_own_tiles_else_its_family_s() -> None:
    """An op's per-target table: gfx950's own entry where the op gives one, else gfx942's;
    a target with no fallback and no entry is an error naming both."""
    table = {"gfx942": "a", "sm_90a": "b"}
    assert GFX950.pick(table) == "a" and GFX942.pick(table) == "a" and SM90A.pick(table) == "b"
    assert GFX950.pick({**table, "gfx950": "c"}) == "c"
    assert GFX950.pick({("gfx942", 64): "d"}, 64) == "d"
    with pytest.raises(KeyError, match="gfx950 or gfx942"):
        GFX950.pick({"sm_90a": "b"})
    lone = Target("gfx1100", "amd", "gfx1100", 32, 64 * 1024, 48, 2**26)
    with pytest.raises(KeyError, match="no entry for gfx1100 in"):
        lone.pick(table)


OPS = {"attention": "llama3-8b.prefill-4k", "fp8_gemm": "llama3-70b.qkv_proj",
       "gemm": "square-4096", "layernorm": "falcon-40b.hidden", "rmsnorm": "llama3-8b.hidden",
       "rope": "llama3-8b.q", "softmax": "llama3-8b.logits-4k", "swiglu": "llama3-8b.mlp"}


@pytest.mark.parametrize("op", sorted(OPS))
def test_every_op_builds_for_gfx950_in_both_languages(op: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Each op's codegen case, TileLang by clang22 and Triton by its own LLVM: a code
    object for gfx950 (its ELF flags say so), every figure, no spills and no scratch (the
    tiles gfx950 takes over from gfx942 where they fit, its own where gfx942's spilled:
    the Triton GEMMs)."""
    from kperf.core import static
    from kperf.suites.static import _kernel, device_artifacts

    _clang22()
    monkeypatch.setenv("ASV_ENV_DIR", str(tmp_path))
    dtype = "fp8e4m3" if op == "fp8_gemm" else "fp16"
    for backend in ("tilelang", "triton"):
        be, case, target = _kernel(op, OPS[op], backend, "gfx950")
        artifacts = device_artifacts(be, case, dtype, target)
        assert codeobj.machine(artifacts["hsaco"])[0] == "gfx950"
        if backend == "tilelang":
            assert artifacts["toolchain"] == "clang22"
        figures = static.figures(artifacts, "amd")
        assert figures["registers"] > 0 and figures["occupancy"] >= 1, (backend, figures)
        assert figures["vgpr_spills"] == figures["scratch_bytes"] == 0, (backend, figures)
        assert figures["shared_bytes"] <= GFX950.shared_mem_bytes


def test_rocm_7_2_2_compiles_gfx950_from_clang22s_ir(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """ROCm 7.2.2's LLVM (22.0.0git) takes clang 22.1.8's textual IR less the attributes it
    does not know, and makes a gfx950 code object of TileLang's GEMM with figures of its
    own (not clang22's: another optimiser and code generator)."""
    from kperf.core import static
    from kperf.suites.static import _kernel, device_artifacts

    _clang22()
    try:
        hip.toolchain("rocm-7.2.2", "gfx950")
    except hip.ToolchainMissing as missing:
        pytest.skip(str(missing))
    monkeypatch.setenv("ASV_ENV_DIR", str(tmp_path))
    be, case, target = _kernel("gemm", OPS["gemm"], "tilelang", "gfx950")
    rocm = device_artifacts(be, case, "fp16", target, "rocm-7.2.2")
    clang22 = device_artifacts(be, case, "fp16", target)
    assert (rocm["toolchain"], clang22["toolchain"]) == ("rocm-7.2.2", "clang22")
    ours, theirs = static.figures(rocm, "amd"), static.figures(clang22, "amd")
    assert codeobj.machine(rocm["hsaco"])[0] == "gfx950"
    assert ours["isa.matrix"] == theirs["isa.matrix"] > 0
    assert ours["code_sha"] != theirs["code_sha"]


def test_the_headroom_counts_gfx950s_lds() -> None:
    """Triton 3.8.0's gfx950 GEMM (kperf upgrade, 2026-12-07): 254 VGPRs, 98.9 KB of LDS
    for 512 threads at 2 waves. Its headroom is 256 VGPRs by gfx950's 160 KiB; by gfx942's
    64 KiB no register count launches it at all, and the line read "254 of 254"."""
    from kperf.core.static import register_headroom

    gemm = {"registers": 254, "occupancy": 2, "threads": 512, "shared_bytes": 101312,
            "sgprs": 46, "lds_per_cu_bytes": 160 * 1024}
    assert register_headroom(gemm, amd=True) == "254 of 256 VGPRs for 2 waves"
    recorded = {k: v for k, v in gemm.items() if k != "lds_per_cu_bytes"}  # before gfx950
    assert register_headroom({**recorded, "shared_bytes": 32768}, amd=True) == \
        "254 of 256 VGPRs for 2 waves"
