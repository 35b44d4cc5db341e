"""The history's steps on the published site, read in Chromium: asv's step detection with
the thresholds of asv.conf.json flags every real step at a class's threshold and no
unchanged control, in time and in energy per call; each step says its cause.

One history of two commits is built on the CPU from records (tests/site_fixture.py,
``build_step_history``: asv's results written by asv, records by kperf.core.record; the
figures synthetic), as a user tries two commits with ``kperf.history.bench --range``. Per class
a case steps by 1.2 times its class's threshold and an unchanged control moves by twice
the class's run-to-run spread (its 90th percentile or so: the bandwidth class's energy
then moves +11.8%, as an unchanged RMSNorm's did with the board's state). Beside them a
GEMM at the power limit whose new code spends more energy per call, so the power
controller gives it a lower clock, and a LayerNorm slowed by heat.

Two commits, because asv's step detection finds little in longer noisy histories: on the
CPU, a step of 1.2 thresholds (4.6 run-to-run sd) in 6-20 commits was found in 30-45% of
draws (docs/site.md, "What asv's step detection finds").
"""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kperf.gate.asvio import asv_threshold
from kperf.gate.config import Thresholds
from kperf.project import DEFAULTS
from kperf.site.spreads import History as Spreads
from kperf.site.steps import summary
from tests import site_fixture as fx

from .conftest import REPO
from .test_site import needs_assets
from .test_site_browser import CHROMIUM_ARGS, _asv_ready, _QuietHandler, chromium

pytestmark = pytest.mark.slow

RMSNORM = "bench_rmsnorm.RmsnormTime.track_time"
LAYERNORM = "bench_layernorm.LayernormTime.track_time"
# per class: (the case that steps, its unchanged control, time per call, energy per call,
# SM clock, board power, throttle bits): a GEMM at the power limit, RMSNorm and the decode
# GEMM below it at the maximum clock
CLASSES = {
    "compute": ((fx.GEMM, "square-8192", "fp16", "tilelang"),
                (fx.GEMM, "square-8192", "fp16", "triton"), 1.76e-3, 1.2, 1421.0, 692.0, 0x4),
    "bandwidth": ((RMSNORM, "llama3-8b.hidden", "bf16", "tilelang"),
                  (RMSNORM, "llama3-8b.hidden", "bf16", "triton"), 70e-6, 0.0407, 1980.0,
                  550.0, 0),
    "decode": ((fx.GEMM, "llama3-8b.gate_up_proj.decode16", "fp16", "tilelang"),
               (fx.GEMM, "llama3-8b.gate_up_proj.decode16", "fp16", "triton"), 88e-6, 0.045,
               1980.0, 520.0, 0),
}
STEP_OVER_THRESHOLD = 1.2
CONTROL_SPREADS = 2.0
# the power-mediated step: same board power at the 700 W limit, more energy per call
POWER_CASE = (fx.GEMM, "square-8192", "bf16", "triton")
POWER_RUNS = [fx.Run(1.762e-3, 0.800, 1362.0, 692.0, 0x4),
              fx.Run(1.929e-3, 0.8776, 1229.0, 693.0, 0x4)]
# a thermal slowdown below the power limit: the environment's
HEAT_CASE = (LAYERNORM, "falcon-40b.hidden", "bf16", "triton")
HEAT_RUNS = [fx.Run(133.0e-6, 0.080, 1980.0, 560.0),
             fx.Run(137.0e-6, 0.081, 1921.0, 555.0, 0x20, temperature_c=88.0)]


def series_name(case: fx.Case, energy: bool = False) -> str:
    bench = fx.energy_name(case[0]) if energy else case[0]
    return f"{bench}({', '.join(repr(p) for p in case[1:])})"


def _conf_thresholds() -> dict[str, float]:
    """What ``kperf publish`` hands asv for this repository's series."""
    from kperf.site.publish import series_thresholds

    table, problem = series_thresholds(REPO)
    assert not problem
    return table


def _runs(case: fx.Case, spec: tuple, time_change: float, energy_change: float
          ) -> list[fx.Run]:
    _, _, time_s, energy_j, clock, power, bits = spec
    at_cap = power >= 0.95 * fx.LIMIT_W
    # at the power limit a kernel of more energy per call gets a lower clock from the power
    # controller: the clock follows the code; below it the clock stays at its maximum
    after_clock = clock / (1 + time_change) if at_cap else clock
    return [fx.Run(time_s, energy_j, clock, power, bits),
            fx.Run(time_s * (1 + time_change), energy_j * (1 + energy_change), after_clock,
                   power, bits)]


def class_history() -> tuple[dict[fx.Case, list[fx.Run]], dict[str, str], dict[str, str]]:
    """Runs at two commits; the series that step and the controls (name -> class)."""
    table, spreads = _conf_thresholds(), Spreads.load(DEFAULTS / "history-thresholds.json")
    gate = Thresholds.load(DEFAULTS / "thresholds.json")
    runs: dict[fx.Case, list[fx.Run]] = {POWER_CASE: POWER_RUNS, HEAT_CASE: HEAT_RUNS}
    stepped: dict[str, str] = {}
    controls: dict[str, str] = {}
    for klass, spec in CLASSES.items():
        step, control = spec[:2]
        for case in spec[:2]:
            assert gate.rule_for(series_name(case))[1].name == klass, case
        runs[step] = _runs(step, spec,
                           STEP_OVER_THRESHOLD * asv_threshold(table, series_name(step)),
                           STEP_OVER_THRESHOLD * asv_threshold(table, series_name(step, True)))
        runs[control] = _runs(control, spec,
                              CONTROL_SPREADS * spreads.spreads[(klass, "time")].value,
                              CONTROL_SPREADS * spreads.spreads[(klass, "energy")].value)
        stepped |= {series_name(step): klass, series_name(step, True): klass}
        controls |= {series_name(control): klass, series_name(control, True): klass}
    return runs, stepped, controls


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[dict[str, Any]]:
    browser_path = chromium()
    pw = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    assets = needs_assets()
    root = tmp_path_factory.mktemp("history")
    runs, stepped, controls = class_history()
    history = fx.build_step_history(root, runs, assets)
    assert fx.publish(history) == 0
    handler = functools.partial(_QuietHandler, directory=str(history.repo / "html"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    errors: list[str] = []
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("pageerror", lambda e: errors.append(str(e)))
        yield {"page": page, "errors": errors, "stepped": stepped, "controls": controls,
               "history": history, "url": f"http://127.0.0.1:{server.server_address[1]}/"}
        browser.close()
    server.shutdown()


def _flagged(history: fx.History) -> dict[str, list[str]]:
    """asv's regressions.json: series -> the commits after each of its steps."""
    html = history.repo / "html"
    r2h = json.loads((html / "index.json").read_text())["revision_to_hash"]
    out: dict[str, list[str]] = {}
    for name, _path, _params, _idx, _last, _best, jumps in json.loads(
            (html / "regressions.json").read_text())["regressions"]:
        out[name] = [r2h[str(j[1])] for j in jumps]
    return out


def _steps(history: fx.History) -> dict[str, dict[str, Any]]:
    payload = json.loads((history.repo / "html" / "kperf" / "steps.json").read_text())
    return {s["series"]: s for s in payload["steps"]}


def _regression_rows(page: Any, url: str) -> dict[str, dict[str, str]]:
    """Each row of asv's regressions page: series -> its commit and the cause beneath."""
    page.goto(url + "index.html#/regressions")
    _asv_ready(page)
    page.wait_for_selector("#regressions-body table tbody tr")
    page.wait_for_function("() => document.querySelectorAll('#regressions-body tbody tr')"
                           ".length === document.querySelectorAll('#regressions-body tbody "
                           "tr .kperf-cause').length")
    rows = {}
    for row in page.locator("#regressions-body table tbody tr").all():
        cells = row.locator("td")
        cause = cells.nth(0).locator(".kperf-cause")
        rows[cells.nth(0).locator("a").first.inner_text()] = {
            "commit": cells.nth(2).inner_text(), "cause": cause.get_attribute("data-cause"),
            "text": cause.inner_text().removesuffix(" head to head").strip()}
    return rows


def test_every_step_at_a_class_threshold_is_flagged_and_no_control(site: dict) -> None:
    history = site["history"]
    flagged = _flagged(history)
    for name in site["stepped"]:
        assert flagged.get(name) == [history.commits[1]], name
    assert not set(flagged) & set(site["controls"])
    rows = _regression_rows(site["page"], site["url"])
    assert set(rows) == set(flagged)  # the page lists what asv flagged, nothing more
    steps = _steps(history)
    for name, klass in site["stepped"].items():
        assert history.commits[1].startswith(rows[name]["commit"].split("..")[-1])
        assert rows[name]["text"] == steps[name]["text"], name
        # at the power limit the GEMM's lower clock is its code's; below it none moved
        assert rows[name]["cause"] == ("code" if klass == "compute" else "none"), name
    assert site["errors"] == []


def test_the_old_thresholds_fail_the_same_history(site: dict, tmp_path: Path) -> None:
    """An asv.conf.json naming thresholds of its own, those before the classes (5% time,
    0.01% for the rest), which publish then uses as they stand: the bandwidth step
    goes unflagged (the compute one, 1.2 x its 4.5%, is past 5%) and the unchanged
    controls' energy is flagged."""
    from kperf.gate.asvio import load_project_conf
    from kperf.site import publish as publish_tool

    history = site["history"]
    conf = load_project_conf(history.repo / "asv.conf.json")
    conf["regressions_thresholds"] = {r".*Time\.track_time": 0.05,
                                      r".*Compile\.track_compile": 0.25, ".*": 0.0001}
    old = tmp_path / "asv.conf.json"
    old.write_text(json.dumps(conf | {"results_dir": str(history.repo / ".asv/results"),
                                      "repo": str(history.repo)}))
    assert publish_tool.publish(repo=history.repo, config=old, html_dir=tmp_path / "html",
                                asset_source=history.assets) == 0
    regressions = json.loads((tmp_path / "html" / "regressions.json").read_text())
    flagged = {entry[0] for entry in regressions["regressions"]}
    assert series_name(CLASSES["bandwidth"][0]) not in flagged
    for klass in ("compute", "bandwidth"):
        assert series_name(CLASSES[klass][1], energy=True) in flagged


def test_a_truncated_results_file_fails_publish_and_the_site_names_it(
        site: dict, tmp_path: Path) -> None:
    """Issue 51: a results file cut short (a killed upload, a full disk) is named on the
    status page and publish exits 1: a nightly must not stay green while a machine's data
    drops out of the graphs."""
    import shutil

    from kperf.gate.asvio import load_project_conf
    from kperf.site import publish as publish_tool

    history = site["history"]
    results = tmp_path / "results"
    shutil.copytree(history.repo / ".asv" / "results", results)
    cut = sorted(p for p in results.glob("*/*.json") if p.name != "machine.json")[-1]
    cut.write_text(cut.read_text()[:200])
    conf = load_project_conf(history.repo / "asv.conf.json")
    mine = tmp_path / "asv.conf.json"
    mine.write_text(json.dumps(conf | {"results_dir": str(results), "repo": str(history.repo)}))
    html = tmp_path / "html"
    assert publish_tool.publish(repo=history.repo, config=mine, html_dir=html,
                                asset_source=history.assets) == 1
    status = (html / "kperf" / "index.html").read_text()
    name = f"results/{cut.parent.name}/{cut.name}"
    assert "results file(s) could not be read, so their data is missing" in status, status
    assert name in status


def test_a_power_mediated_step_shows_its_cause_on_both_pages(site: dict) -> None:
    history, page = site["history"], site["page"]
    gemm_time, gemm_energy = series_name(POWER_CASE), series_name(POWER_CASE, True)
    (b, a) = POWER_RUNS
    expected = (f"x{a.time_s / b.time_s:.3f}, energy {100 * (a.energy_j / b.energy_j - 1):+.1f}"
                f"%, clock {b.sm_clock_mhz:.0f} → {a.sm_clock_mhz:.0f} MHz at the "
                f"{fx.LIMIT_W:.0f} W limit: the code's own")
    rows = _regression_rows(page, site["url"])
    assert rows[gemm_time]["text"] == expected and rows[gemm_time]["cause"] == "code"
    # its energy step (+9.7%) is past the compute class's energy threshold (9.5%, computed
    # from the A/A data: docs/site.md "Regression thresholds of the history"): flagged too,
    # with the time row's cause
    assert a.energy_j / b.energy_j - 1 > asv_threshold(_conf_thresholds(), gemm_energy)
    assert rows[gemm_energy]["cause"] == "code"
    heat = rows[series_name(HEAT_CASE)]
    assert heat["cause"] == "environment" and "0x20" in heat["text"]
    page.locator(f"#regressions-body tr:has(a:text-is(\"{gemm_time}\")) .kperf-cause a").click()
    page.wait_for_url("**/kperf/head-to-head.html#step-*")
    row = page.locator(f"tr.step[data-series=\"{gemm_time}\"]")
    assert row.get_attribute("data-cause") == "code" and expected in row.inner_text()
    assert page.url.endswith("#" + row.get_attribute("id"))
    cell = page.locator('tr[data-op="gemm"][data-case="square-8192"][data-dtype="bf16"]'
                        '[data-backend="triton"] td.step')
    assert cell.get_attribute("data-cause") == "code"
    text = cell.inner_text()
    assert f"x{a.time_s / b.time_s:.3f} @{history.commits[1][:8]}" in text
    assert "the code's own" in text
    quiet = page.locator('tr[data-op="layernorm"][data-case="falcon-40b.hidden"]'
                         '[data-dtype="bf16"][data-backend="tilelang"] td.step')
    assert quiet.inner_text() == "—"  # a case asv flagged nothing in
    assert site["errors"] == []


def test_the_cause_line_is_the_gates_wording() -> None:
    """The line a step shows, from its figures (kperf/site/steps.py:summary)."""
    from kperf.site.steps import Side, Step

    step = Step("s(1)", "m", "s", {}, Side("a", 1.0, 1.0, 1362.0, 692.0, 700.0),
                Side("b", 1.095, 1.097, 1229.0, 693.0, 700.0), 1, time_ratio=1.095,
                energy_ratio=1.097, cause="code")
    assert summary(step) == ("x1.095, energy +9.7%, clock 1362 → 1229 MHz at the 700 W "
                             "limit: the code's own")
    step.cause, step.why = "environment", "not at the power limit on both sides"
    assert summary(step).endswith("692 → 693 W of 700: the environment's (not at the power "
                                  "limit on both sides)")
