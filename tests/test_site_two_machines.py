"""One site from two machines' histories of one commit, read offline in Chromium: a GPU
runner's timings and the CPU codegen runner's figures, as the nightly stores them and
publishes them together (tests/data/two-machines: recorded 2026-12-06, see its doc).

The GPU runner (an H200 set up from the offline bundle, no LLVM 19) ran no CPU-side suite:
it left them to the CPU runner rather than record every gfx942 series as NaN. The CPU
runner (the CPU machine) ran them under four gfx942 toolchains, one asv environment each.
The recorded commit is re-homed onto a commit of a fresh repository: asv publishes only
commits of its branch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import site_fixture as fx

from .test_site import needs_assets
from .test_site_browser import _asv_ready, chromium, served_page

pytestmark = pytest.mark.slow

DATA = Path(__file__).parent / "data" / "two-machines.json"
CHAINS = ("clang19", "rocm-6.4.4", "rocm-7.0.2", "rocm-7.2.2")


def _rehome(text: str, old: str, new: str) -> str:
    return text.replace(old, new).replace(old[:8], new[:8])


def _history(repo: Path) -> tuple[dict[str, Any], str]:
    """The recorded results and records under ``repo/.asv``, re-homed onto its commit."""
    data = json.loads(DATA.read_text())
    (commit,) = fx.step_commits(repo, 1)
    old = data["commit"]
    for rel, content in data["files"].items():
        path = repo / ".asv" / _rehome(rel, old, commit)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_rehome(content, old, commit))
    return data, commit


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[dict[str, Any]]:
    chromium()
    assets = needs_assets()
    repo = tmp_path_factory.mktemp("two-machines") / "repo"
    data, commit = _history(repo)
    history = fx.History(repo=repo, commits=[commit], env=dict(os.environ),
                         records=repo / ".asv" / "records", assets=assets)
    assert fx.publish(history) == 0
    with served_page(repo / "html") as served:
        yield {**served, "repo": repo, "data": data}


def test_the_gpu_runner_holds_no_code_series(site: dict) -> None:
    """Each figure from the machine that can make it: the GPU runner's history has its
    timings and no CPU-side series at all, so no gfx942 series of it is NaN."""
    gpu, cpu = site["data"]["gpu_machine"], site["data"]["cpu_machine"]
    graphs = site["repo"] / "html" / "graphs"
    mine = [p for p in graphs.rglob("*.json") if f"machine-{gpu}" in p.as_posix()]
    names = {p.name.removesuffix(".json") for p in mine}
    assert any(n.endswith("Time.track_time") for n in names), names
    code = ("Registers", "Scratch", "SharedMem", "Occupancy", "CodeSize", "Compile")
    assert not [n for n in names if any(f"{c}.track_" in n for c in code)]
    theirs = {p.name for p in graphs.rglob("*.json") if f"machine-{cpu}" in p.as_posix()}
    assert "bench_gemm.GemmOccupancy.track_value.json" in theirs
    runner = [p for p in graphs.rglob("bench_gemm.GemmRegisters.track_value.json")
              if f"machine-{cpu}" in p.as_posix()]
    assert len(runner) == len(CHAINS)  # a graph per toolchain's environment
    for path in runner:
        values = [v for _rev, row in json.loads(path.read_text()) for v in row]
        assert len(values) == 4 and None not in values, path  # both targets, both backends


def test_codegen_and_timings_together_offline(site: dict) -> None:
    page, gpu, cpu = site["page"], site["data"]["gpu_machine"], site["data"]["cpu_machine"]
    page.goto(site["url"] + "kperf/codegen.html")
    assert page.locator(f"h2#machine-{cpu}").count() == 1
    assert page.locator(f"h2#machine-{gpu}").count() == 0  # it made no code figure
    table = page.locator('table.codegen[data-op="gemm"]').first
    groups = set(table.locator("th[data-group]").evaluate_all(
        "els => els.map(e => e.getAttribute('data-group'))"))
    assert groups == {f"gfx942 · {c}" for c in CHAINS} | {"sm_90a"}, groups
    occupancy = table.locator('td[data-group="gfx942 · clang19"][data-backend="tilelang"]'
                              '[data-figure="occupancy"]').inner_text()
    assert occupancy.startswith("3"), occupancy
    compiles = table.locator('td[data-figure="compile_s"]').all_inner_texts()
    # every toolchain's own compile, each record at its commit (not "nocommit", whose
    # compiles were skipped as timed at commit None)
    assert len(compiles) == 2 * len(groups) and "—" not in compiles, compiles
    beside = page.locator(f'ul.timings[data-op="gemm"] li[data-machine="{gpu}"]')
    text = beside.inner_text()
    assert "TileLang" in text and "Triton" in text and "µs" in text, text
    page.goto(site["url"] + "index.html")
    _asv_ready(page)
    page.goto(site["url"] + "kperf/head-to-head.html")
    assert page.locator(f"text={gpu}").count() >= 1
    assert site["elsewhere"] == [] and site["errors"] == []
