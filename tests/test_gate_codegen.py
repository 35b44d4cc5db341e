"""The gate's word on generated code (kperf/gate/codegen.py): per target and toolchain a
verdict, and a line per changed kernel in the code's terms, read from the figures a real
CPU gate recorded (tests/data/codegen-gate-blocks.json: the TileLang GEMM's block_K
32 -> 64 for gfx942, under clang19 and ROCm 7.2.2's LLVM)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kperf.gate import codegen
from kperf.gate.model import Verdict
from kperf.gate.report import md

DATA = json.loads((Path(__file__).parent / "data" / "codegen-gate-blocks.json").read_text())
GFX = "bench_gemm.GemmOccupancy.track_value('gfx942', 'fp16', 'tilelang')"
SM = "bench_gemm.GemmOccupancy.track_value('sm_90a', 'fp16', 'tilelang')"
TRITON = "bench_gemm.GemmOccupancy.track_value('gfx942', 'fp16', 'triton')"


def _case(name: str, target: str, backend: str = "tilelang", chain: str | None = None,
          kind: str = "static") -> dict:
    case = {"name": name + (f" [{chain}]" if chain else ""), "kind": kind, "target": target,
            "spec": {"op": "gemm", "case": "square-4096", "dtype": "fp16", "backend": backend}}
    return {**case, "toolchain": chain} if chain else case


def _rows(case: dict, base: dict | None, head: dict | None) -> list[dict]:
    return [{"case": case["name"], "side": side, "status": "ok", "figures": figs}
            for side, figs in (("base", base), ("head", head)) if figs]


def _v(case: dict, verdict: str = "SAME", unchanged: bool = False, unit: str = "waves",
       ratio: float | None = None, before: float = 0.0, after: float = 0.0) -> Verdict:
    return Verdict(case["name"], "", "static", verdict=verdict, unit=unit, unchanged=unchanged,
                   ratio=ratio, before=before, after=after, decided=True)


def _recorded(chain: str) -> codegen.Kernel:
    case = _case(GFX, "gfx942", chain=chain)
    sides = DATA["kernels"][case["name"]]
    (kernel,) = codegen.kernels([case], _rows(case, sides["base"], sides["head"]),
                                [_v(case, "SLOW")])
    return kernel


def test_an_occupancy_drop_names_its_limit_and_what_moved_it() -> None:
    line = codegen.cause_line(_recorded("clang19"))
    assert line == ("gemm square-4096 fp16 TileLang: block_K 32 → 64: occupancy 3 → 2 waves, "
                    "limited by LDS: 16 KB → 32 KB; VGPRs 144 → 148; code 3520 B → 4444 B")


def test_a_toolchain_that_moves_the_registers_says_both_limits() -> None:
    line = codegen.cause_line(_recorded("rocm-7.2.2"))
    assert ("occupancy 3 → 2 waves, limited by VGPRs: 148 → 188 and LDS: 16 KB → 32 KB"
            in line)
    assert "AGPRs 72 → 104" in line and "VGPRs 148 → 188;" not in line  # said once


def test_a_source_change_with_the_same_device_code_says_so() -> None:
    sides = DATA["kernels"][SM]
    case = _case(SM, "sm_90a")
    (kernel,) = codegen.kernels([case], _rows(case, sides["base"], sides["head"]), [_v(case)])
    assert kernel.code_unchanged() is True
    assert codegen.cause_line(kernel) == "gemm square-4096 fp16 TileLang: sm_90a code unchanged"
    base = {**sides["base"], "config": {**sides["base"]["config"], "num_stages": 3}}
    head = {**sides["base"], "config": {**sides["base"]["config"], "num_stages": 2}}
    (kernel,) = codegen.kernels([case], _rows(case, base, head), [_v(case)])
    assert codegen.cause_line(kernel).endswith(": num_stages 3 → 2: sm_90a code unchanged")


def test_different_code_with_no_figure_moved_is_not_called_unchanged() -> None:
    sides = DATA["kernels"][SM]
    head = {**sides["base"], "code_sha": "0" * 16}
    case = _case(SM, "sm_90a")
    (kernel,) = codegen.kernels([case], _rows(case, sides["base"], head), [_v(case)])
    assert kernel.code_unchanged() is False
    assert "sm_90a code changed, no figure moved" in codegen.cause_line(kernel)


def test_a_kernel_read_on_one_side_only_is_not_judged_unchanged() -> None:
    case = _case(SM, "sm_90a")
    (kernel,) = codegen.kernels([case], _rows(case, DATA["kernels"][SM]["base"], None),
                                [_v(case)])
    assert kernel.code_unchanged() is None
    assert "not read on both sides" in codegen.cause_line(kernel)


def test_a_compile_that_moved_is_named_in_the_kernels_line() -> None:
    static, comp = _case(SM, "sm_90a"), _case(SM.replace("Occupancy", "Compile").replace(
        "track_value", "track_compile"), "sm_90a", kind="compile")
    sides = DATA["kernels"][SM]
    rows = _rows(static, sides["base"], sides["head"])
    verdicts = [_v(static), _v(comp, "SLOW", unit="seconds", ratio=1.52, before=1.52,
                                after=2.31)]
    (kernel,) = codegen.kernels([static, comp], rows, verdicts)
    assert codegen.cause_line(kernel).endswith(
        "sm_90a code unchanged; cold compile SLOW x1.52 (1.52 → 2.31 CPU s)")
    assert kernel.verdict() == "SLOW"


@pytest.mark.parametrize(("words", "worst"), [
    (["SAME", "FAST"], "FAST"), (["SAME", "INCONCLUSIVE", "FAST"], "INCONCLUSIVE"),
    (["FAST", "SLOW", "INCONCLUSIVE"], "SLOW"), ([], "SAME")])
def test_a_groups_verdict_is_its_worst_case(words: list[str], worst: str) -> None:
    case = _case(SM, "sm_90a")
    assert codegen.worst([_v(case, w) for w in words]) == worst
    broken = _v(case, "INCONCLUSIVE")
    broken.broke = True
    assert codegen.worst([_v(case, "SLOW"), broken]) == "BROKEN"


def test_each_toolchain_gets_a_row_with_tritons_gfx942_code_in_it() -> None:
    """A toolchain compiles TileLang's HIP source; Triton brings its own LLVM, so its gfx942
    kernel is in every toolchain's row (each row is the gfx942 verdict under that
    toolchain) and is measured once."""
    cases = [_case(GFX, "gfx942", chain=c) for c in ("clang19", "rocm-7.2.2")]
    cases += [_case(TRITON, "gfx942", "triton"), _case(SM, "sm_90a")]
    rows = [r for c in cases[:2] for r in _rows(c, *DATA["kernels"][c["name"]].values())]
    verdicts = [_v(cases[0], "SLOW"), _v(cases[1], "SLOW"), _v(cases[2], "FAST"),
                _v(cases[3], unchanged=True)]
    found = codegen.kernels(cases, rows, verdicts)
    rows_of = {(t, c): ks for t, c, ks in codegen.groups(found)}
    assert set(rows_of) == {("gfx942", "clang19"), ("gfx942", "rocm-7.2.2"),
                            ("sm_90a", "nvcc · Triton's LLVM")}
    for chain in ("clang19", "rocm-7.2.2"):
        assert {k.backend for k in rows_of[("gfx942", chain)]} == {"tilelang", "triton"}
    text = "\n".join(codegen.section(found, {"gfx942/tilelang/rocm-7.0.2": "not installed"}, md))
    assert "| gfx942 | clang19 | **SLOW** |" in text and "| sm\\_90a |" in text
    assert "1 kernel(s) not measured: source unchanged" in text
    assert "Not judged on this machine" in text and "rocm-7.0.2: not installed" in text
    summary = codegen.summary_json(found)
    assert [g["verdict"] for g in summary] == ["SLOW", "SLOW", "SAME"]
    assert summary[0]["kernels"][0]["config_change"] == "block_K 32 → 64"


def test_a_compile_that_held_is_not_named() -> None:
    static, comp = _case(SM, "sm_90a"), _case(SM.replace("Occupancy", "Compile").replace(
        "track_value", "track_compile"), "sm_90a", kind="compile")
    sides = DATA["kernels"][SM]
    (kernel,) = codegen.kernels([static, comp], _rows(static, sides["base"], sides["head"]),
                                [_v(static), _v(comp, "SAME", unit="seconds", ratio=1.01,
                                                before=1.52, after=1.54)])
    assert codegen.cause_line(kernel).endswith("sm_90a code unchanged")


def test_gfx942_tilelang_cases_alone_are_judged_per_toolchain() -> None:
    """A toolchain compiles TileLang's HIP source for gfx942 only: Triton's gfx942 cases,
    sm_90a's cases and the timed ones are judged once."""
    from kperf.gate import cli

    cases = [_case(GFX, "gfx942"), _case(TRITON, "gfx942", "triton"), _case(SM, "sm_90a"),
             {**_case(GFX.replace("Occupancy", "Time").replace("track_value", "track_time"),
                      "gfx942"), "kind": "time"}]
    out = cli.per_toolchain(cases, ["clang19", "rocm-7.2.2"])
    assert [c["name"] for c in out] == [f"{GFX} [clang19]", f"{GFX} [rocm-7.2.2]", TRITON, SM,
                                        cases[3]["name"]]
    assert [c.get("toolchain") for c in out] == ["clang19", "rocm-7.2.2", None, None, None]


def test_a_case_this_machine_cannot_build_is_left_out_saying_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kperf.core import static
    from kperf.gate import cli

    monkeypatch.setattr(static, "unavailable", lambda target, backend, chain=None: (
        "rocm-7.0.2: not installed" if chain == "rocm-7.0.2" else ""))
    cases = cli.per_toolchain([_case(GFX, "gfx942"), _case(SM, "sm_90a")],
                              ["clang19", "rocm-7.0.2"])
    kept, why = cli.buildable(cases)
    assert [c["name"] for c in kept] == [f"{GFX} [clang19]", SM]
    assert why == {"gfx942/tilelang/rocm-7.0.2": "rocm-7.0.2: not installed"}


def test_a_short_compile_keeps_its_figures_apart() -> None:
    """A Triton LayerNorm gfx942 compile, 116 -> 123 ms, reads so, not 0.12 -> 0.12."""
    static, comp = _case(SM, "sm_90a"), _case(SM.replace("Occupancy", "Compile").replace(
        "track_value", "track_compile"), "sm_90a", kind="compile")
    sides = DATA["kernels"][SM]
    verdicts = [_v(static), _v(comp, "INCONCLUSIVE", unit="seconds", ratio=1.118,
                                before=0.1163, after=0.1231)]
    (kernel,) = codegen.kernels([static, comp], _rows(static, sides["base"], sides["head"]),
                                verdicts)
    assert codegen.cause_line(kernel).endswith(
        "cold compile INCONCLUSIVE x1.12 (0.116 → 0.123 CPU s)")


def test_registers_that_cost_nothing_say_their_headroom_and_small_scratch_reads_in_bytes(
        ) -> None:
    """Issue 49: a register move at unchanged occupancy names the room left ("... of ...
    VGPRs for N waves"); 16 bytes of scratch read "16 B", never "0.0 KB"."""
    base = {**DATA["kernels"][f"{GFX} [clang19]"]["base"], "code_sha": "a" * 16}
    head = {**base, "code_sha": "b" * 16, "registers": base["registers"] + 4,
            "scratch_bytes": 16}
    case = _case(GFX, "gfx942", chain="clang19")
    (kernel,) = codegen.kernels([case], _rows(case, base, head), [_v(case)])
    line = codegen.cause_line(kernel)
    assert f"VGPRs {base['registers']} → {base['registers'] + 4}" in line
    assert "scratch 0 KB → 16 B" in line
    assert f"occupancy unchanged: {base['registers'] + 4} of " in line
    assert f"VGPRs for {base['occupancy']:g} waves" in line


def test_gfx950_has_its_own_toolchain_rows() -> None:
    """gfx950's TileLang code is clang22's wherever clang19 or llvm19 is asked for (LLVM 19
    has no gfx950), judged once; a target's Triton kernels go into its own toolchains' rows
    only: gfx942's Triton code is never under clang22, gfx950's never under clang19."""
    from kperf.gate import cli

    g950, t950 = GFX.replace("gfx942", "gfx950"), TRITON.replace("gfx942", "gfx950")
    cases = cli.per_toolchain([_case(GFX, "gfx942"), _case(g950, "gfx950")],
                              ["clang19", "llvm19"])
    assert [c.get("toolchain") for c in cases] == ["clang19", "llvm19", "clang22"]
    figures = DATA["kernels"][f"{GFX} [clang19]"]["base"]
    cases = [_case(GFX, "gfx942", chain="clang19"), _case(g950, "gfx950", chain="clang22"),
             _case(TRITON, "gfx942", "triton"), _case(t950, "gfx950", "triton")]
    rows = [r for c in cases for r in _rows(c, figures, {**figures, "registers": 1})]
    found = codegen.kernels(cases, rows, [_v(c, "SAME") for c in cases])
    rows_of = {(t, c): sorted(k.backend for k in ks) for t, c, ks in codegen.groups(found)}
    assert rows_of == {("gfx942", "clang19"): ["tilelang", "triton"],
                       ("gfx950", "clang22"): ["tilelang", "triton"]}
