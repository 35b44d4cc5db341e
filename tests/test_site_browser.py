"""The published site in a real browser, offline.

A small history (tests/site_fixture.py: real CPU-side asv results at three commits, plus
GPU-suite results and records that are synthetic and labelled so) is published by
kperf/site/publish.py, served from 127.0.0.1 and opened in headless Chromium (Debian's
``chromium`` package, driven by Playwright; tools/test.sh installs both) with every request
to another host aborted. Checked: no request leaves the host, no page error, asv's grid,
graph and regressions pages render (canvas, no redirect to error.html), the kperf pages are
reachable by links, and their figures equal the results and records they come from (the
codegen page's: real records, tests/codegen_fixture.py; it also opens from disk).
Screenshots of every page go to ``KPERF_SCREENSHOTS`` (the docs' are made with
``KPERF_SCREENSHOTS=docs/img``), else to a temporary folder: a test run leaves the tree as
it found it.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import statistics
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from kperf.site import codegen
from kperf.site.pages import fmt_num
from tests import codegen_fixture
from tests import site_fixture as fx

from .conftest import REPO
from .test_site import needs_assets

pytestmark = pytest.mark.slow

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium() -> str:
    for path in (os.environ.get("KPERF_CHROMIUM"), "/usr/lib/chromium/chromium",
                 "/usr/bin/chromium"):
        if path and Path(path).exists():
            return path
    reason = ("no Chromium: apt-get install -y --no-install-recommends chromium "
              "fonts-dejavu-core (tools/test.sh does)")
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[dict[str, Any]]:
    browser_path = chromium()
    pw = pytest.importorskip("playwright.sync_api", reason="pip install playwright "
                                                           "(pinned in pyproject.toml, dev)")
    tmp = tmp_path_factory.mktemp("site")
    history = fx.build_history(REPO, tmp, needs_assets())
    assert fx.publish(history) == 0
    html = history.repo / "html"
    handler = functools.partial(_QuietHandler, directory=str(html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    blocked: list[str] = []
    errors: list[str] = []
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 900})

        def route(r: Any) -> None:
            url = urlparse(r.request.url)
            local = url.scheme in ("http", "https") and url.hostname == "127.0.0.1" \
                and url.port == port
            if local or url.scheme == "file":
                r.continue_()
            else:
                blocked.append(r.request.url)
                r.abort()

        context.route("**/*", route)
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        yield {"page": page, "base": f"http://127.0.0.1:{port}/", "html": html,
               "history": history, "blocked": blocked, "errors": errors}
        browser.close()
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def served_page(html: Path) -> Iterator[dict[str, Any]]:
    """A published site (``html``) served on a free local port and a Chromium page for it:
    ``page``, its ``url``, the page's script ``errors`` and the requests that went
    ``elsewhere`` than the local server."""
    browser_path = chromium()
    pw = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    handler = functools.partial(_QuietHandler, directory=str(html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    errors: list[str] = []
    elsewhere: list[str] = []
    try:
        with pw.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=browser_path, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: None if r.url.startswith(
                ("http://127.0.0.1", "data:")) else elsewhere.append(r.url))
            yield {"page": page, "errors": errors, "elsewhere": elsewhere,
                   "url": f"http://127.0.0.1:{server.server_address[1]}/"}
            browser.close()
    finally:
        server.shutdown()


@functools.cache
def _shots_dir() -> Path:
    """Made on the first screenshot, not when the module is collected: ``KPERF_SCREENSHOTS``
    to keep them (docs/site.md), else in the test session's folder, removed with it."""
    shots = Path(os.environ.get("KPERF_SCREENSHOTS")
                 or tempfile.mkdtemp(prefix="kperf-shots-", dir=os.environ.get("KPERF_TEST_CACHE")))
    shots.mkdir(parents=True, exist_ok=True)
    return shots


def _shot(page: Any, name: str, full: bool = False) -> None:
    page.screenshot(path=str(_shots_dir() / f"site-{name}.png"), full_page=full)


def _assert_clean(site: dict[str, Any]) -> None:
    assert site["blocked"] == [], f"requests to other hosts: {site['blocked']}"
    assert site["errors"] == [], f"page errors: {site['errors']}"
    assert "error.html" not in site["page"].url
    assert site["page"].evaluate("() => window.__kperf_xss") is None


def _asv_ready(page: Any) -> None:
    page.wait_for_function("() => window.$ && $.asv && $.asv.main_json &&"
                           " $.asv.main_json.revision_to_hash")


def test_grid_renders_offline_and_links_to_kperf(site: dict[str, Any]) -> None:
    page = site["page"]
    page.goto(site["base"] + "index.html")
    _asv_ready(page)
    # asv draws a grid cell when it scrolls into view: the real CPU figure's cell
    cell = page.locator("[id='summarygrid-bench_gemm.GemmRegisters.track_value']")
    cell.scroll_into_view_if_needed()
    cell.locator("canvas").first.wait_for()
    page.evaluate("() => window.scrollTo(0, 0)")
    banner = page.locator("#kperf-no-results")
    banner.wait_for()
    assert "have no results" in banner.inner_text()
    _shot(page, "grid")
    page.click("#nav-li-kperf-h2h a")
    page.wait_for_url("**/kperf/head-to-head.html")
    page.click("nav.kperf >> text=clocks & power per point")
    page.wait_for_url("**/kperf/telemetry.html")
    page.go_back()
    page.go_back()
    _asv_ready(page)
    for item, url in (("#nav-li-kperf-telemetry a", "**/kperf/telemetry.html"),
                      ("#nav-li-kperf-gate a", "**/kperf/gate/index.html"),
                      ("#nav-li-kperf-status a", "**/kperf/index.html")):
        page.click(item)
        page.wait_for_url(url)
        page.go_back()
        _asv_ready(page)
    _assert_clean(site)


def test_regressions_page_lists_the_steps(site: dict[str, Any]) -> None:
    page = site["page"]
    page.goto(site["base"] + "index.html#/regressions")
    _asv_ready(page)
    page.wait_for_selector("#regressions-body table tbody tr")
    expected = json.loads((site["html"] / "regressions.json").read_text())["regressions"]
    assert expected, "the fixture's history has steps asv should flag"
    shown = page.locator("#regressions-body table tbody tr").all_inner_texts()
    names = {r[0] for r in expected}
    assert any("GemmSharedMem" in n for n in names)  # the real CPU figure doubled
    assert any("GemmTime" in n for n in names)  # the synthetic 15% step
    for name in names:
        assert any(name.split(".")[1] in row for row in shown), (name, shown)
    _shot(page, "regressions")
    _assert_clean(site)


def _record_of(site: dict[str, Any], commit: str, bench: str, case: str, dtype: str,
               backend: str) -> list[dict[str, Any]]:
    folder = site["history"].records / fx.GPU_MACHINE / f"{commit[:8]}-{fx.ENV}" / bench
    out = []
    for path in folder.glob("*.json"):
        rec = json.loads(path.read_text())
        if rec["params"] == {"case": case, "dtype": dtype, "backend": backend}:
            out.append(rec)
    return out


def _result(site: dict[str, Any], commit: str, bench: str, params: tuple[str, ...]) -> Any:
    import itertools

    path = site["history"].repo / ".asv" / "results" / fx.GPU_MACHINE / \
        f"{commit[:8]}-{fx.ENV}.json"
    data = json.loads(path.read_text())
    row = dict(zip(data["result_columns"], data["results"][bench], strict=False))
    combos = list(itertools.product(*row["params"]))
    return row["result"][combos.index(tuple(repr(p) for p in params))]


def test_graph_point_shows_its_clock_and_opens_its_telemetry(site: dict[str, Any]) -> None:
    page = site["page"]
    commits = site["history"].commits
    page.goto(site["base"] + "index.html#bench_gemm.GemmTime.track_time?machine="
              f"{fx.GPU_MACHINE}&p-case='square-4096'&p-dtype='fp16'&p-backend='tilelang'")
    _asv_ready(page)
    page.wait_for_function("() => { const p = $('#main-graph').data('plot');"
                           " return p && p.getData().length > 0; }")
    assert page.locator("#main-graph canvas").count() >= 1
    points = page.evaluate("""() => { const plot = $('#main-graph').data('plot');
        const off = plot.getPlaceholder().offset(); const out = [];
        for (const s of plot.getData()) for (const d of s.data) { if (d[1] === null) continue;
          const o = plot.pointOffset({x: d[0], y: d[1]});
          out.push({x: o.left + off.left, y: o.top + off.top, value: d[1]}); }
        return out; }""")
    values = [p["value"] for p in points]
    assert values == [_result(site, c, fx.GEMM, ("square-4096", "fp16", "tilelang"))
                      for c in commits]
    slow = points[1]  # the regressed commit, timed at a low clock
    page.mouse.move(slow["x"], slow["y"])
    tip = page.locator(".tooltip-inner")
    tip.wait_for()
    text = tip.inner_text()
    (rec,) = _record_of(site, commits[1], fx.GEMM, "square-4096", "fp16", "tilelang")
    windows = rec["measurement"]["windows"]
    clock = statistics.median(w["sm_clock_mhz_median"] for w in windows)
    assert f"SM {clock:.0f} MHz" in text and commits[1][:8] in text
    assert "throttle: HwThermalSlowdown SwPowerCap" in text
    assert "not recorded before schema 2" in text
    _shot(page, "graph")
    page.mouse.click(slow["x"], slow["y"])
    page.wait_for_url("**/kperf/telemetry.html#point=*")
    rows = page.locator("#rows tr.point")
    assert rows.count() == 1
    assert rows.first.locator("td").nth(3).inner_text() == commits[1][:8]
    _assert_clean(site)


def test_head_to_head_equals_results_and_records(site: dict[str, Any]) -> None:
    page = site["page"]
    commits = site["history"].commits
    page.goto(site["base"] + "kperf/head-to-head.html")
    assert "has no GPU" in page.locator(".machine-empty").inner_text()
    rows = page.locator(f'tr[data-machine="{fx.GPU_MACHINE}"]')
    seen = {}
    for i in range(rows.count()):
        row = rows.nth(i)
        key = tuple(row.get_attribute(f"data-{k}") for k in ("op", "case", "dtype", "backend"))
        assert row.get_attribute("data-commit") == commits[-1]
        seen[key] = row
    assert set(seen) == {("gemm", "square-4096", "fp16", b) for b in ("tilelang", "triton",
                                                                       "torch")} | {
        ("softmax", "llama3-8b.logits-4k", "bf16", b) for b in ("tilelang", "triton", "torch")}
    torch_time = _result(site, commits[-1], fx.GEMM, ("square-4096", "fp16", "torch"))
    best_gemm = max(r["tflops"] for c in commits for b in ("tilelang", "triton", "torch")
                    for r in _record_of(site, c, fx.GEMM, "square-4096", "fp16", b))
    for backend in ("tilelang", "triton", "torch"):
        row = seen[("gemm", "square-4096", "fp16", backend)]
        time = _result(site, commits[-1], fx.GEMM, ("square-4096", "fp16", backend))
        (rec,) = _record_of(site, commits[-1], fx.GEMM, "square-4096", "fp16", backend)

        def v(cls: str, row: Any = row) -> float:
            return float(row.locator(f"td.{cls}").get_attribute("data-v"))

        assert v("time") == time
        assert v("tflops") == rec["tflops"] and v("gbps") == rec["gbps"]
        assert v("energy") == rec["energy_per_call_j"]  # schema 2 at the last commit
        assert v("roof") == pytest.approx(rec["tflops"] / best_gemm)
        if backend != "torch":
            assert v("vs") == pytest.approx(torch_time / time)
        trend = json.loads(row.locator("svg.trend").get_attribute("data-values"))
        assert trend == [_result(site, c, fx.GEMM, ("square-4096", "fp16", backend))
                         for c in commits]
        assert row.locator("a[href^='telemetry.html#point=']").count() == 1
    soft = {b: seen[("softmax", "llama3-8b.logits-4k", "bf16", b)] for b in
            ("tilelang", "triton", "torch")}
    assert "skipped" in soft["tilelang"].inner_text()
    assert "failed" in soft["triton"].inner_text()
    assert soft["torch"].locator("td.time").get_attribute("data-v") == repr(
        _result(site, commits[-1], fx.SOFTMAX, ("llama3-8b.logits-4k", "bf16", "torch")))
    assert "commit/" + commits[-1] in page.locator(f"h3[id='{fx.GPU_MACHINE}-gemm'] a")\
        .get_attribute("href")
    assert page.locator("#warnings li").count() == 2  # the truncated and the alien record
    _shot(page, "head-to-head", full=True)
    page.click("a[href^='telemetry.html#point=']")
    page.wait_for_url("**/kperf/telemetry.html#point=*")
    assert page.locator("#rows tr.point").count() == 1
    _assert_clean(site)


def test_telemetry_rows_equal_the_records(site: dict[str, Any]) -> None:
    page = site["page"]
    page.goto(site["base"] + "kperf/telemetry.html")
    good = [json.loads(p.read_text()) for p in site["history"].records.rglob("*.json")
            if "broken" not in p.parts]
    rows = page.locator("#rows tr.point")
    assert rows.count() == len(good) == 16
    assert page.locator("#warnings li").count() == 2
    commits = site["history"].commits
    (rec,) = _record_of(site, commits[-1], fx.GEMM, "square-4096", "fp16", "triton")
    from kperf.site import data

    pid = data.point_id(data.record_key(rec))
    row = page.locator(f"#row-{pid}")
    cells = row.locator("td")
    samples = rec["measurement"]["samples"]
    windows = rec["measurement"]["windows"]
    assert float(cells.nth(4).get_attribute("data-v")) == statistics.median(samples)
    assert float(cells.nth(6).get_attribute("data-v")) == statistics.median(
        w["sm_clock_mhz_median"] for w in windows)
    assert float(cells.nth(10).get_attribute("data-v")) == pytest.approx(statistics.fmean(
        w["power_w_mean"] for w in windows))
    assert float(cells.nth(12).get_attribute("data-v")) == rec["energy_per_call_j"]
    assert cells.nth(3).locator("a").get_attribute("href").endswith("commit/" + commits[-1])
    _shot(page, "telemetry", full=True)
    cells.nth(5).click()  # the row opens its samples
    assert page.locator("#rows tr.detail").count() == 1
    page.locator("#row-" + pid + " a", has_text="graph").click()
    _asv_ready(page)
    page.wait_for_function("() => { const p = $('#main-graph').data('plot');"
                           " return p && p.getData().length > 0; }")
    assert "GemmTime" in page.url
    _assert_clean(site)


def test_codegen_page_shows_every_op_beside_triton(site: dict[str, Any]) -> None:
    page = site["page"]
    commit = site["history"].commits[-1]
    page.goto(site["base"] + "index.html")
    _asv_ready(page)
    page.click("#nav-li-kperf-codegen a")
    page.wait_for_url("**/kperf/codegen.html")
    assert commit[:8] in page.locator(f"h2[id='machine-{fx.CPU_MACHINE}']").inner_text()
    tables = page.locator("table.codegen")
    assert tables.evaluate_all("ts => ts.map(t => t.dataset.op)") == list(codegen_fixture.OPS)
    records = codegen_fixture.load()
    groups = ["gfx942 · clang19", "gfx942 · rocm-7.2.2", "sm_90a"]
    for op in codegen_fixture.OPS:
        table = page.locator(f"table.codegen[data-op='{op}']")
        assert table.locator("th[data-group]").all_inner_texts() == groups
        assert table.locator("tr").nth(1).inner_text().split() == ["TileLang", "Triton"] * 3
        for rec in (r for r in records if r["kind"] == "codegen" and r["op"] == op):
            group = f"gfx942 · {rec['toolchain']}" if rec["toolchain"] else "sm_90a"
            for key in ("registers", "shared_bytes", "occupancy", "isa.matrix"):
                cell = table.locator(f"td[data-group='{group}'][data-backend="
                                     f"'{rec['params']['backend']}'][data-figure='{key}']")
                if key in rec["figures"]:
                    assert json.loads(cell.get_attribute("data-v")) == rec["figures"][key]
                elif key.startswith("isa."):  # a kind absent from a read mix is 0
                    assert cell.get_attribute("data-v") == "0"
                else:  # a figure that binary does not give, with the reason on hover
                    assert cell.inner_text() == "—" and "not among" in cell.get_attribute("title")
    summary = page.locator("ul.summary[data-op='gemm']").inner_text()
    for backend in ("tilelang", "triton"):
        (timed,) = [r for r in records if r["kind"] == "compile" and r["benchmark"].startswith(
            "bench_gemm.") and r["params"] == {"target": "gfx942", "dtype": "fp16",
                                                "backend": backend}
                    and r["env_name"].endswith("clang19")]
        seconds = fmt_num(statistics.median(timed["samples"]), 2)
        assert f"{codegen.NAMES[backend]} {seconds} s" in summary
    _shot(page, "codegen")
    page.goto((site["html"] / "kperf" / "codegen.html").as_uri())  # from disk, too
    assert page.locator("table.codegen").count() == len(codegen_fixture.OPS)
    page.click("nav.kperf >> text=head to head")
    page.wait_for_url("**/kperf/head-to-head.html")
    page.click("nav.kperf >> text=codegen")
    page.wait_for_url("**/kperf/codegen.html")
    _assert_clean(site)


def test_gate_and_status_pages(site: dict[str, Any]) -> None:
    page = site["page"]
    page.goto(site["base"] + "kperf/gate/index.html")
    link = page.locator("table.gate-reports a").first
    assert link.inner_text() == "sm_90 <i>fixture</i>"  # shown as text, not markup
    assert page.locator("table.thresholds tr").count() >= 5
    _shot(page, "gate")
    link.click()
    page.wait_for_url("**/kperf/gate/*.html")
    verdicts = page.locator("table.gate-cases tr.case td:nth-child(3)").all_inner_texts()
    assert verdicts == ["SLOW", "SAME"]
    assert "<script>alert(1)</script>" in page.locator("pre.md").inner_text()
    _shot(page, "gate-report", full=True)
    page.goto(site["base"] + "kperf/index.html")
    text = page.locator("body").inner_text()
    assert "works offline" in text and "github.com/kperf-example/kperf/commit/" in text
    assert page.locator("#missing + p + table tr").count() > 10
    assert str(site["history"].repo) not in page.content()  # no build-machine path
    _shot(page, "status", full=True)
    _assert_clean(site)
