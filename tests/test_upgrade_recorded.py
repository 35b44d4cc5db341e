"""The upgrade report of a real candidate, decided again from what was recorded: Triton
3.7.1 (pinned) against 3.9.0 at 41e6d62, every Triton kernel for gfx942 and sm_90a, on the
CPU machine on 2026-12-07 (``kperf upgrade --triton 3.9.0``; docs/amd.md, "Before you
upgrade"). Its lines in the code's terms: spills and scratch that fail, registers that
move at the same occupancy and pass with their headroom, code sizes, slower cold compiles,
code that did not change. The toy's tests/test_upgrade.py covers occupancy falls, LDS
overflows and toolchain pairs."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RECORDED = Path(__file__).parent / "data" / "upgrade" / "triton-3.7.1-to-3.9.0.tar.xz"


@pytest.fixture(scope="module")
def decided(tmp_path_factory: pytest.TempPathFactory) -> dict:
    run = tmp_path_factory.mktemp("upgrade-recorded")
    with tarfile.open(RECORDED) as archive:
        archive.extractall(run, filter="data")
    out = run / "out"
    proc = subprocess.run([sys.executable, "-m", "kperf", "upgrade", "--no-run", "--repo",
                           str(REPO), "--pr-dir", str(run), "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    report = json.loads((out / "gate.json").read_text())
    lines = {(g["target"], k["kernel"]): k["line"] for g in report["codegen"]
             for k in g["kernels"]}
    return {"code": proc.returncode, "log": proc.stdout + proc.stderr, "report": report,
            "out": out,
            "text": (out / "gate.md").read_text(), "lines": lines,
            "cases": {c["case"]: c for c in report["cases"]}}


def test_spills_fail_the_report(decided: dict) -> None:
    assert decided["code"] == 1, decided["log"]
    line = decided["lines"][("gfx942", "gemm square-4096 fp16 Triton")]
    assert line.startswith("gemm square-4096 fp16 Triton: VGPRs 244 → 256; VGPR spills 0 → 47; "
                           "scratch 0 KB → 144 B; code 8672 B → 8884 B; occupancy unchanged: "
                           "256 of 256 VGPRs for 2 waves; cold compile SLOW x1.37 (0.63 → "
                           "0.872 CPU s)"), line
    registers = decided["cases"]["bench_gemm.GemmRegisters.track_value('gfx942', 'fp16', "
                                 "'triton')"]
    assert registers["verdict"] == "SLOW"
    assert registers["reason"] == "costs: VGPR spills 0 → 47, scratch bytes 0 → 144"
    scratch = decided["cases"]["bench_gemm.GemmScratch.track_value('gfx942', 'fp16', 'triton')"]
    assert scratch["verdict"] == "SLOW"
    assert scratch["reason"] == "costs: VGPR spills 0 → 47, scratch bytes 0 → 144"


def test_registers_at_the_same_occupancy_pass_with_their_headroom(decided: dict) -> None:
    line = decided["lines"][("gfx942", "fp8_gemm llama3-70b.qkv_proj fp8e4m3 Triton")]
    assert "VGPRs 228 → 254; code 14312 B → 14408 B; occupancy unchanged: 254 of 256 VGPRs " \
           "for 2 waves" in line, line
    fp8 = decided["cases"]["bench_fp8_gemm.Fp8GemmRegisters.track_value('gfx942', 'fp8e4m3', "
                           "'triton')"]
    assert fp8["verdict"] == "SAME"
    assert fp8["reason"] == ("changed, no cost: occupancy 2 unchanged; 254 of 256 VGPRs for 2 "
                             "waves"), fp8


def test_compile_times_and_unchanged_code_read_in_the_lines(decided: dict) -> None:
    gemm = decided["lines"][("sm_90a", "gemm square-4096 fp16 Triton")]
    assert "cold compile SLOW x1.65 (0.605 → 0.987 CPU s)" in gemm, gemm
    rope = decided["lines"][("sm_90a", "rope llama3-8b.q fp16 Triton")]
    assert rope.startswith("rope llama3-8b.q fp16 Triton: sm_90a code unchanged; cold compile "
                           "SLOW x1.29"), rope
    softmax = decided["lines"][("sm_90a", "softmax llama3-8b.logits-4k fp16 Triton")]
    assert softmax.startswith("softmax llama3-8b.logits-4k fp16 Triton: local memory 0 KB → "
                              "8 B"), softmax


def test_the_report_names_both_stacks_and_what_it_left_out(decided: dict) -> None:
    text = decided["text"]
    assert text.startswith("<!-- kperf-gate -->\n### Before you upgrade — triton 3.9.0\n")
    assert ("commit `41e6d62e7c` on vm-cpu: triton 3.7.1 (base) → triton 3.9.0 (head) "
            "(TileLang kernels not compiled: their compilers are the same on both sides); "
            "base and head built side by side, each with its stack's compilers") in text, text
    assert {g["toolchain"] for g in decided["report"]["codegen"]} == {
        "Triton's LLVM", "nvcc · Triton's LLVM"}
    assert not any("'tilelang'" in case for case in decided["cases"])


def test_the_upgrade_page_shows_the_report_offline_in_chromium(decided: dict,
                                                              tmp_path: Path) -> None:
    """The site's "before you upgrade" page (kperf/site/gatepages.py) from the kept report,
    as the nightly's publish builds it: every line of the report, red where it costs,
    loaded in Chromium from nothing but the site's own folder."""
    import shutil

    from kperf.site import data, gatepages, repo_data

    from .test_site_browser import served_page

    kept = tmp_path / "gate-reports" / "2026-12-07-night"
    kept.mkdir(parents=True)
    for name in ("gate.json", "gate.md"):
        shutil.copy(decided["out"] / name, kept / name)
    kperf = tmp_path / "html" / "kperf"
    kperf.mkdir(parents=True)
    notes = data.Notes()
    gatepages.write(kperf, repo_data.read_gate_reports([tmp_path / "gate-reports"], notes),
                    None, notes, "")
    assert not notes.items, notes.items
    with served_page(tmp_path / "html") as served:
        page = served["page"]
        page.goto(served["url"] + "kperf/upgrade.html")
        heading = page.inner_text("section.upgrade h2")
        assert heading == "triton 3.7.1 → triton 3.9.0 REGRESSION", heading
        rows = page.query_selector_all("table.upgrade-codegen tr")[1:]
        cells = {r.query_selector_all("td")[0].inner_text(): r.inner_text() for r in rows}
        assert "VGPR spills 0 → 47" in cells["gfx942"], cells
        assert "cold compile SLOW x1.65" in cells["sm_90a"]
        verdicts = [r.query_selector("td.verdict-SLOW") for r in rows]
        assert all(verdicts), "both targets' rows red: each has a kernel that pays"
        page.click("section.upgrade h2 a")  # the whole report, on its gate page
        page.wait_for_selector("table.gate-cases")
        assert "GemmRegisters" in page.inner_text("table.gate-cases")
        assert served["errors"] == [] and served["elsewhere"] == [], served
