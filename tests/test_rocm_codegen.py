"""gfx942 on the CPU: TileLang's HIP source to a code object, figures read from real compiler
output, the toolchain in the digests, and the pinned pieces checked.

These need clang-19, lld-19, llvm-19 (apt) and `kperf toolchain install`
(bash tools/setup_env.sh does both); without them they fail, saying so: the gfx942 TileLang
figures are what they guard. The ROCm-release test needs `kperf toolchain fetch
rocm-7.2.2`, which setup_env.sh does too.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from kperf import toolchains as rocm_toolchain
from kperf.core import codeobj, hip, static
from kperf.ops.registry import get_op
from kperf.ops.targets import GFX942

from .conftest import REPO

ROCM = "rocm-7.2.2"


@pytest.fixture(autouse=True)
def _default_toolchain(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default gfx942 toolchain (clang19) unless a test names one: a developer's
    ``KPERF_ROCM_TOOLCHAIN=rocm-7.2.2`` failed four of these (issue 45)."""
    monkeypatch.delenv(hip.TOOLCHAIN_ENV, raising=False)


def _aot(op_name: str, backend: str, dtype: str = "fp16") -> dict:
    op = get_op(op_name)
    case = op.case({"gemm": "square-4096", "attention": "llama3-8b.prefill-4k"}.get(
        op_name, "llama3-8b.hidden"))
    return op.backend(backend, case.name).aot(case, dtype, GFX942)


@pytest.fixture(scope="module")
def rmsnorm_tilelang() -> dict:
    return _aot("rmsnorm", "tilelang")


def _assembly(artifacts: dict) -> str:
    """clang-19's ``-S`` output for the source (the text LLVM 19's asm printer writes)."""
    flags = hip._front_end_flags("gfx942", artifacts["include_dirs"])
    src = subprocess.run([hip.tool_path("clang"), *flags, "-S", "-o", "-", "-"],
                         input=artifacts["source"], capture_output=True, text=True, timeout=300)
    assert src.returncode == 0, src.stderr[-2000:]
    return src.stdout


def test_tilelang_source_becomes_a_code_object_with_every_figure(rmsnorm_tilelang):
    artifacts = hip.with_code_object(rmsnorm_tilelang, "amd", "gfx942")
    figures = static.figures(artifacts, "amd")
    assert artifacts["hsaco"][:4] == b"\x7fELF" and artifacts["toolchain"] == "clang19"
    for name in ("registers", "sgprs", "scratch_bytes", "vgpr_spills", "lds_static_bytes",
                 "shared_bytes", "occupancy", "occupancy_limit", "code_bytes",
                 "isa.instructions", "isa.global_load.128"):
        assert name in figures, (name, figures)
    # the dynamic LDS TileLang asks for at launch is counted beside the static part
    assert figures["shared_bytes"] == figures["lds_static_bytes"] + rmsnorm_tilelang["shared_bytes"]


def test_both_sgpr_forms_are_read_from_real_compiler_output(rmsnorm_tilelang):
    """LLVM 19 (clang-19) prints NumSgprs; LLVM 20+ (Triton 3.7's) prints TotalNumSgprs."""
    llvm19 = _assembly(rmsnorm_tilelang)
    triton = _aot("rmsnorm", "triton")["amdgcn"]
    assert re.search(r"; NumSgprs: \d+", llvm19) and "TotalNumSgprs" not in llvm19
    assert re.search(r"; TotalNumSgprs: \d+", triton)
    code_object = hip.with_code_object(rmsnorm_tilelang, "amd", "gfx942")["hsaco"]
    from_notes = codeobj.main_kernel(codeobj.parse_kernel_metadata(
        codeobj._run_tool("llvm-readelf", ["--notes"], code_object)))["sgpr_count"]
    assert static.parse_amdgcn(llvm19)["sgprs"] == from_notes
    triton_hsaco = _aot("rmsnorm", "triton")["hsaco"]
    triton_notes = codeobj.main_kernel(codeobj.parse_kernel_metadata(
        codeobj._run_tool("llvm-readelf", ["--notes"], triton_hsaco)))
    assert static.parse_amdgcn(triton)["sgprs"] == triton_notes["sgpr_count"]


@pytest.mark.parametrize(("op_name", "backend"), [("gemm", "triton"), ("attention", "triton"),
                                                  ("rmsnorm", "triton"), ("gemm", "tilelang"),
                                                  ("attention", "tilelang")])
def test_occupancy_agrees_with_llvm_where_llvm_sees_all_the_lds(op_name, backend):
    """With the static LDS alone our rule gives LLVM's own figure (asm ``; Occupancy:``);
    with the dynamic LDS of the launch it may only be lower, and says what limits it."""
    aot = _aot(op_name, backend)
    asm = aot["amdgcn"] if backend == "triton" else _assembly(aot)
    llvm = static.parse_amdgcn(asm)["occupancy"]
    kernel = codeobj.main_kernel(codeobj.parse_kernel_metadata(codeobj._run_tool(
        "llvm-readelf", ["--notes"], hip.with_code_object(aot, "amd", "gfx942")["hsaco"])))
    static_only, _ = codeobj.occupancy(kernel["vgpr_count"], kernel["sgpr_count"],
                                       kernel["group_segment_fixed_size"],
                                       kernel["max_flat_workgroup_size"])
    assert static_only == llvm
    figures = static.figures(hip.with_code_object(aot, "amd", "gfx942"), "amd")
    assert figures["occupancy"] <= llvm


def test_instruction_mix_counts_by_kind_and_width():
    text = "\n".join(["\tv_mfma_f32_16x16x16_f16 a[0:3], v[0:1], v[2:3], a[0:3]",
                      "\tglobal_load_dwordx4 v[0:3], v4, s[0:1]",
                      "\tbuffer_load_dwordx2 v[0:1], v2, s[0:3], 0 offen",
                      "\tds_read_u16 v1, v2", "\tds_read2_b32 v[1:2], v3 offset1:1",
                      "\tds_write_b128 v1, v[2:5]", "\ts_waitcnt vmcnt(0)", "\ts_barrier",
                      "<kernel>:", "\ts_endpgm"])
    assert codeobj.instruction_mix(text) == {
        "barrier": 1, "global_load.128": 1, "global_load.64": 1, "instructions": 9,
        "lds_read.16": 1, "lds_read.64": 1, "lds_write.128": 1, "matrix": 1, "wait": 1}


def test_the_split_route_reproduces_clang19_exactly(rmsnorm_tilelang):
    """clang-19's front end + Debian's libLLVM-19 back end + ld.lld-19 is clang-19's own
    code, instruction for instruction: what differs under a ROCm release is that release's."""
    def disassembly(chain: str) -> str:
        co = hip.compile_hip(rmsnorm_tilelang["source"], "gfx942",
                             rmsnorm_tilelang["include_dirs"], hip.toolchain(chain))["hsaco"]
        text = codeobj._run_tool("llvm-objdump", ["-d", "--mcpu=gfx942", "--no-show-raw-insn"],
                                 co)
        return text.split("Disassembly of section .text:", 1)[1]

    assert disassembly("llvm19") == disassembly("clang19")


def test_a_rocm_release_compiles_with_its_own_llvm_and_enters_the_digest(monkeypatch):
    aot = _aot("gemm", "tilelang")
    ours = static.figures(hip.with_code_object(aot, "amd", "gfx942"), "amd")
    monkeypatch.setenv(hip.TOOLCHAIN_ENV, ROCM)
    theirs = static.figures(hip.with_code_object(aot, "amd", "gfx942"), "amd")
    assert theirs["code_bytes"] != ours["code_bytes"] or theirs["registers"] != ours["registers"]
    identities = set()
    for chain in ("clang19", "llvm19", ROCM):
        monkeypatch.setenv(hip.TOOLCHAIN_ENV, chain)
        identities.add(hip.toolchain_identity())
    assert len(identities) == 3 and not any(i.startswith("absent") for i in identities)


def test_an_unknown_or_missing_toolchain_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv(hip.TOOLCHAIN_ENV, "rocm-9.9.9")
    with pytest.raises(hip.ToolchainMissing,
                       match=r"rocm-9\.9\.9.*kperf toolchain fetch"):
        hip.toolchain()
    monkeypatch.setenv(hip.TOOLCHAIN_ENV, "hipcc")
    with pytest.raises(hip.ToolchainMissing, match="not a toolchain"):
        hip.toolchain()
    monkeypatch.setenv(hip.ROOT_ENV, str(tmp_path))
    monkeypatch.setenv(hip.TOOLCHAIN_ENV, "clang19")
    with pytest.raises(hip.ToolchainMissing, match="kperf toolchain install"):
        hip.compile_hip("__global__ void k() {}")
    assert hip.toolchain_identity().startswith("absent: ")


def test_a_source_the_compiler_refuses_fails_with_its_message():
    with pytest.raises(hip.CompileFailed, match="no_such_function"):
        hip.compile_hip('extern "C" __global__ void k(float* x) { x[0] = no_such_function(); }')


def test_installed_pieces_match_their_pins(tmp_path, monkeypatch):
    pins = rocm_toolchain.load_pins()
    tree = rocm_toolchain.install_hip_tree(pins, tmp_path)
    assert (tree / "usr" / "include" / "hip" / "hip_runtime.h").exists()
    assert (tree / "bitcode" / "ocml.bc").exists()
    assert json.loads((tree / "tree.json").read_text())["debs"]
    # a carried package that is not its pinned file is refused, naming it
    bad = tmp_path / "debs"
    shutil.copytree(rocm_toolchain.DEBS, bad)
    first = bad / pins["hip_tree"]["debs"][0]["file"]
    first.write_bytes(first.read_bytes()[:-1] + b"\0")
    monkeypatch.setattr(rocm_toolchain, "DEBS", bad)
    with pytest.raises(rocm_toolchain.ToolchainError, match=re.escape(f"{first.name}: sha256")):
        rocm_toolchain.install_hip_tree(pins, tmp_path / "other")
    assert not (tmp_path / "other" / "hip").exists()


def test_the_pins_file_is_validated(tmp_path, monkeypatch):
    from kperf.config import ConfigError

    pins = json.loads((REPO / "kperf" / "toolchains" / "rocm-toolchains.json").read_text())
    pins["hip_tree"]["debs"][0]["take"] = {"usr/include/hip": "../../etc"}
    bad = tmp_path / "rocm-toolchains.json"
    bad.write_text(json.dumps(pins))
    monkeypatch.setattr(rocm_toolchain, "PINS", bad)
    with pytest.raises(ConfigError, match="/hip_tree/debs/0/take"):
        rocm_toolchain.load_pins()


def test_the_compile_suite_times_tilelang_to_a_code_object_and_codegen_is_recorded(
        monkeypatch, tmp_path):
    """Like with like: TileLang's timed gfx942 compile includes the device compile, as
    Triton's does; the code-size suite keeps every figure for the codegen page."""
    from benchmarks.bench_rmsnorm import RmsnormCodeSize, RmsnormCompile
    from kperf.suites import static as _static

    for name, value in (("KPERF_RECORD_DIR", tmp_path / "records"), ("KPERF_MACHINE", "cg-test"),
                        ("ASV_ENV_DIR", tmp_path / "env"), ("ASV_COMMIT", "ab" * 20),
                        ("KPERF_COMPILE", "every")):
        monkeypatch.setenv(name, str(value))
    device_compiles: list[float] = []
    real = hip.compile_hip

    def counted(*args, **kwargs):
        device_compiles.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(hip, "compile_hip", counted)
    monkeypatch.setattr(RmsnormCompile, "repeat", 2)
    params = ("gfx942", "fp16", "tilelang")
    suite = RmsnormCompile()
    suite.setup(*params)
    primed = len(device_compiles)
    samples = suite.track_compile(*params)["samples"]
    assert len(samples) == 2 and len(device_compiles) == primed + 2
    size = RmsnormCodeSize()
    size.setup(*params)
    assert size.track_value(*params) > 0
    (kept,) = _static.codegen_record_root().glob("cg-test/*/*CodeSize*/*.json")
    record = json.loads(kept.read_text())
    assert record["toolchain"] == "clang19" and record["params"]["backend"] == "tilelang"
    assert record["figures"]["code_bytes"] == size.track_value(*params)
    assert record["figures"]["occupancy_limit"] and record["figures"]["isa.instructions"] > 0


def test_sass_mix_uses_the_same_names():
    """sm_90a's code size and mix from cuobjdump -sass, keyed as gfx942's."""
    text = "\n".join([
        "        /*0000*/                   LDC R1, c[0x0][0x28] ;   /* 0x00000a00ff017b82 */",
        "        /*0010*/                   HGMMA.64x256x16.F32 R24, gdesc[UR4], RZ ; /* x */",
        "        /*0020*/              @!P0 LDG.E.128 R4, desc[UR6][R2.64] ;  /* x */",
        "        /*0030*/                   LDGSTS.E.BYPASS.128 [R5], desc[UR8][R6.64] ;",
        "        /*0040*/                   LDSM.16.M88.4 R8, [R9] ;",
        "        /*0050*/                   STS.128 [R1], R4 ;",
        "        /*0060*/                   LDS.U16 R3, [R2] ;",
        "        /*0070*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;",
        "        /*0080*/                   DEPBAR.LE SB0, 0x1 ;",
        "        /*0090*/                   UTMALDG.2D [UR8], [UR4] ;",
        "                .headerflags    @\"EF_CUDA_SM90\""])
    assert static.parse_sass(text) == {
        "code_bytes": 160, "isa.barrier": 1, "isa.global_load.128": 2,
        "isa.instructions": 10, "isa.lds_read.128": 1, "isa.lds_read.16": 1,
        "isa.lds_write.128": 1, "isa.matrix": 1, "isa.tma_load": 1, "isa.wait": 1}
