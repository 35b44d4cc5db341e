"""Code series on the published site: an occupancy that falls is flagged (asv flags rises
only: kperf/site/falls.py), and a step of a static figure says its cause in the code's
terms, from the codegen records of the series' own environment (kperf/site/steps.py),
read in Chromium on asv's regressions page.

A synthetic history of three commits on one machine with two gfx942 toolchains (two asv
environments): under clang19 the TileLang GEMM's tile edit at the second commit takes its
LDS from 16 to 32 KB and its occupancy from 3 to 2 waves; under rocm-7.2.2 nothing moves,
and its codegen records are the later ones, so a step that pooled the two environments'
records would read them. No figure of it was measured.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import site_fixture as fx

from .test_history_site import _regression_rows
from .test_site import needs_assets
from .test_site_browser import chromium, served_page

pytestmark = pytest.mark.slow

MACHINE = "synthetic-codegen"
CHAINS = ("clang19", "rocm-7.2.2")
OCCUPANCY = "bench_gemm.GemmOccupancy.track_value"
SHARED = "bench_gemm.GemmSharedMem.track_value"
KERNEL = ("gfx942", "fp16", "tilelang")
# per toolchain and commit: (occupancy, LDS bytes, block_K) of the TileLang GEMM on gfx942
FIGURES = {"clang19": [(3, 16384, 32), (2, 32768, 64), (2, 32768, 64)],
           "rocm-7.2.2": [(3, 16384, 32), (3, 16384, 32), (3, 16384, 32)]}


def _env(chain: str) -> str:
    return f"virtualenv-py3.11-KPERF_ROCM_TOOLCHAIN{chain}"


def _figures(chain: str, i: int) -> dict[str, Any]:
    occupancy, lds, block_k = FIGURES[chain][i]
    return {"registers": 144, "sgprs": 40, "shared_bytes": lds, "occupancy": occupancy,
            "occupancy_limit": "LDS" if occupancy == 2 else "VGPRs", "code_bytes": 3520,
            "code_sha": f"{chain}-{block_k}", "scratch_bytes": 0}


def _results(results: Path, meta: dict, commit: str, date: int, chain: str, i: int) -> None:
    from asv.results import Results
    from asv.runner import BenchmarkResult

    params = {"arch": "x86_64", "machine": MACHINE, "python": "3.11",
              "env-KPERF_ROCM_TOOLCHAIN": chain}
    res = Results(params, {}, commit, date, "3.11", _env(chain),
                  {"KPERF_ROCM_TOOLCHAIN": chain})
    figures = _figures(chain, i)
    for name, figure in ((OCCUPANCY, "occupancy"), (SHARED, "shared_bytes")):
        bench = meta[name]
        values = [float(figures[figure]) if tuple(json.loads(p.replace("'", '"'))
                                                  for p in combo) == KERNEL else float("nan")
                  for combo in itertools.product(*bench["params"])]
        res.add_result(bench, BenchmarkResult(result=values, samples=[None] * len(values),
                                              number=[None] * len(values), errcode=0,
                                              stderr="", profile=None),
                       started_at=None, duration=1.0)
    res.save(str(results))


def _codegen_record(root: Path, commit: str, chain: str, i: int, later: float) -> None:
    from kperf.core import record

    figures = _figures(chain, i)
    env = {"KPERF_MACHINE": MACHINE, "ASV_COMMIT": commit, "ASV_ENV_NAME": _env(chain)}
    with pytest.MonkeyPatch.context() as patch:  # what asv and kperf.history.asvrun set
        for key, value in env.items():
            patch.setenv(key, value)
        record.write_record("bench_gemm.GemmCodeSize.track_value",
                            dict(zip(("target", "dtype", "backend"), KERNEL, strict=True)),
                            {"kind": "codegen", "op": "gemm", "case": "square-4096",
                             "toolchain": chain, "figures": figures,
                             "config": {"block_K": FIGURES[chain][i][2], "num_stages": 3},
                             "recorded_at": 1.0e9 + 10 * i + later}, root)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[dict[str, Any]]:
    chromium()
    assets = needs_assets()
    repo = tmp_path_factory.mktemp("codesteps") / "repo"
    commits = fx.step_commits(repo, 3)
    results = repo / ".asv" / "results"
    meta = fx._write_benchmarks(results)
    (results / MACHINE).mkdir(parents=True, exist_ok=True)
    (results / MACHINE / "machine.json").write_text(json.dumps(
        {"arch": "x86_64", "machine": MACHINE, "version": 1}))
    for i, commit in enumerate(commits):
        date = int(fx.git(repo, "show", "-s", "--format=%ct", commit)) * 1000
        for later, chain in enumerate(CHAINS):  # rocm-7.2.2's records are the later ones
            _results(results, meta, commit, date, chain, i)
            _codegen_record(repo / ".asv" / "codegen-records", commit, chain, i, later)
    history = fx.History(repo=repo, commits=commits, env=dict(os.environ),
                         records=repo / ".asv" / "records", assets=assets)
    assert fx.publish(history) == 0
    with served_page(repo / "html") as served:
        yield {**served, "repo": repo, "commits": commits}


def _series(name: str) -> str:
    return f"{name}({', '.join(repr(p) for p in KERNEL)})"


def test_an_occupancy_that_falls_is_flagged_in_its_environment_only(site: dict) -> None:
    html = site["repo"] / "html"
    r2h = json.loads((html / "index.json").read_text())["revision_to_hash"]
    entries = [e for e in json.loads((html / "regressions.json").read_text())["regressions"]
               if e[0] == _series(OCCUPANCY)]
    assert len(entries) == 1, entries
    _name, graph, shown, _idx, last, best, jumps = entries[0]
    assert "env-KPERF_ROCM_TOOLCHAIN-clang19" in graph and shown == {
        "env-KPERF_ROCM_TOOLCHAIN": "clang19"}
    assert (last, best) == (2.0, 3.0)
    ((first, after, before_v, after_v),) = jumps
    assert first is None and r2h[str(after)] == site["commits"][1]  # one commit: the culprit
    assert (before_v, after_v) == (3.0, 2.0)


def test_a_static_step_says_its_cause_in_the_codes_terms(site: dict) -> None:
    steps = json.loads((site["repo"] / "html" / "kperf" / "steps.json").read_text())["steps"]
    by_series = {s["series"]: s for s in steps}
    expected = ("block_K 32 → 64: occupancy 3 → 2 waves, limited by LDS: 16 KB → 32 KB")
    for name in (OCCUPANCY, SHARED):
        step = by_series[_series(name)]
        assert step["cause"] == "code" and step["text"] == expected, step
        assert step["after"]["commit"] == site["commits"][1]
        assert "clang19" in step["graph_path"]
    rows = _regression_rows(site["page"], site["url"])
    assert set(rows) == {_series(OCCUPANCY), _series(SHARED)}
    occupancy = rows[_series(OCCUPANCY)]
    assert occupancy["text"] == expected and occupancy["cause"] == "code"
    factor = site["page"].locator(f"#regressions-body tr:has(a:text-is(\"{_series(OCCUPANCY)}"
                                  "\")) td").all_inner_texts()
    assert "0.67x" in factor, factor  # asv's own page: the fall with its factor
    assert site["errors"] == []
