"""The published site's parts without a browser (tools/publish.py, tools/site/): tolerant
readers, escaping, units, commit links, offline assets, asv's patched graph code, the
atomic swap and an asv publish that fails. tests/test_site_browser.py renders the whole
site in Chromium; the codegen page is built from real records (tests/codegen_fixture.py)."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tools import publish, telemetry_pages
from tools.site import asv_pages, codegen, codegen_page, data, gatepages, headtohead, pages

from . import codegen_fixture
from .conftest import REPO

ASV_WWW = Path(__import__("asv").__file__).parent / "www"
ASSETS = REPO / ".cache" / "site-assets" / "node_modules"
HOSTILE = '<script>window.__x=1</script>"&\'<img src=x onerror=alert(1)>'


def needs_assets() -> Path:
    if not (ASSETS / "jquery" / "package.json").exists():
        proc = subprocess.run(["bash", str(REPO / "tools/site/install_assets.sh")],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"site assets not installed and install_assets.sh failed: "
                        f"{proc.stderr.strip()[-300:]}")
    return ASSETS


def _record(commit: str = "a" * 40, schema: str = "kperf-record-2", **extra) -> dict:
    rec = {"schema": schema, "benchmark": "bench_gemm.GemmTime.track_time",
           "params": {"case": "square-4096", "dtype": "fp16", "backend": "triton"},
           "machine": "m1", "commit": commit, "env_name": "env",
           "tflops": 600.0, "gbps": 400.0,
           "measurement": {"samples": [1e-4, 1.1e-4, 1.2e-4], "number": 10,
                           "telemetry_backend": "nvml", "telemetry_reason": "x",
                           "windows": [{"n_readings": 2, "sm_clock_mhz_median": 1400.0,
                                        "power_w_mean": 600.0, "power_limit_w": 700.0,
                                        "energy_j": 6.0, "throttle_bits_or": 4}] * 3}}
    if schema == "kperf-record-2":
        rec["energy_per_call_j"] = 0.06
    rec.update(extra)
    return rec


# ----------------------------------------------------------------- readers


def test_records_bad_files_are_skipped_with_a_note(tmp_path: Path) -> None:
    root = tmp_path / "records"
    (root / "m1" / "c").mkdir(parents=True)
    (root / "m1" / "c" / "ok.json").write_text(json.dumps(_record()))
    (root / "m1" / "c" / "old.json").write_text(json.dumps(_record(schema="kperf-record-1")))
    (root / "m1" / "c" / "truncated.json").write_text('{"schema": "kperf-rec')
    (root / "m1" / "c" / "list.json").write_text("[1, 2]")
    (root / "m1" / "c" / "alien.json").write_text(json.dumps({"schema": "x-1"}))
    (root / "m1" / "c" / "future.json").write_text(json.dumps(_record(schema="kperf-record-9")))
    (root / "m1" / "c" / "nowindows.json").write_text(json.dumps(
        _record(measurement={"windows": "no"})))
    (root / "m1" / "c" / ".ok.json.tmp123").write_text("{")  # an interrupted atomic write
    notes = data.Notes()
    recs = data.read_records([root, tmp_path / "absent"], notes)
    assert sorted(r["schema"] for r in recs) == ["kperf-record-1", "kperf-record-2",
                                                 "kperf-record-9"]
    what = dict(notes.items)
    assert set(what) == {"records/m1/c/truncated.json", "records/m1/c/list.json",
                         "records/m1/c/alien.json", "records/m1/c/future.json",
                         "records/m1/c/nowindows.json"}
    assert "newer than this site knows" in what["records/m1/c/future.json"]
    assert not any(str(tmp_path) in w + t for w, t in notes.items)


def test_packed_records_are_read_like_loose_ones(tmp_path: Path) -> None:
    root = tmp_path / ".asv" / "records"
    (root / "m1" / "c").mkdir(parents=True)
    (root / "m1" / "c" / "r.json").write_text(json.dumps(_record()))
    out = tmp_path / "kept" / "m1-2026-12-01.tar.xz"
    assert publish.pack_records(root, out) == 1
    (tmp_path / "kept" / "bad.tar.xz").write_bytes(b"not a tar")
    notes = data.Notes()
    recs = data.read_records([tmp_path / "kept"], notes)
    assert len(recs) == 1 and recs[0]["_source"] == "kept/m1-2026-12-01.tar.xz:m1/c/r.json"
    assert [w for w, _ in notes.items] == ["kept/bad.tar.xz"]


def test_results_reader_skips_a_broken_file(tmp_path: Path) -> None:
    m = tmp_path / "m1"
    m.mkdir()
    (m / "machine.json").write_text(json.dumps({"machine": "m1", "gpu": "g", "version": 1}))
    (m / "aaaaaaaa-env.json").write_text(json.dumps({
        "commit_hash": "a" * 40, "env_name": "env", "date": 5,
        "result_columns": ["result", "params"],
        "results": {"b.S.track_time": [[1e-3, None, float("nan")],
                                       [["'x'"], ["'fp16'"], ["'tilelang'", "'triton'",
                                                               "'torch'"]]]}}))
    (m / "bbbbbbbb-env.json").write_text('{"commit_hash": ')
    (tmp_path / "benchmarks.json").write_text("{trunc")
    notes = data.Notes()
    machines, files, benchmarks = data.read_results(tmp_path, notes)
    assert list(machines) == ["m1"] and len(files) == 1 and benchmarks == {}
    assert {w for w, _ in notes.items} == {"results/benchmarks.json",
                                          "results/m1/bbbbbbbb-env.json"}
    pts = data.points_of(files[0], "b.S.track_time", {})
    assert [p.params["backend"] for p in pts] == ["tilelang", "triton", "torch"]
    assert [p.status for p in pts] == ["ok", "failed", "skipped"]


@pytest.mark.parametrize(("remote", "web"), [
    ("git@github.com:org/kperf.git", "https://github.com/org/kperf"),
    ("https://github.com/org/kperf.git", "https://github.com/org/kperf"),
    ("https://user:ghp_secret@github.com/org/kperf", "https://github.com/org/kperf"),
    ("ssh://git@gitlab.example.com:2222/grp/sub/kperf.git",
     "https://gitlab.example.com/grp/sub/kperf"),
    ("/work/main", None), ("../kperf", None), ("file:///srv/kperf.git", None)])
def test_commit_links_from_the_remote(remote: str, web: str | None) -> None:
    assert data.web_url_of_remote(remote) == web


def test_commit_link_settings_take_precedence(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "remote", "add", "origin", "git@gitlab.com:g/k.git"], cwd=tmp_path,
                   check=True)
    monkeypatch.delenv("KPERF_COMMIT_URL", raising=False)
    assert data.commit_links(tmp_path, {"show_commit_url": "#"})[:2] == (
        "https://gitlab.com/g/k/-/commit/", "https://gitlab.com/g/k")
    assert data.commit_links(tmp_path, {"show_commit_url": "https://x/c/"})[0] == "https://x/c/"
    monkeypatch.setenv("KPERF_COMMIT_URL", "https://intranet/kperf/commit/")
    assert data.commit_links(tmp_path, {})[0] == "https://intranet/kperf/commit/"
    monkeypatch.delenv("KPERF_COMMIT_URL")
    subprocess.run(["git", "remote", "remove", "origin"], cwd=tmp_path, check=True)
    url, _, how = data.commit_links(tmp_path, {})
    assert url == "" and how.startswith("none")


# ----------------------------------------------------------------- figures and pages


def test_units_fit_kernels() -> None:
    assert [pages.fmt_time(x) for x in (2.3e-4, 1.5, 0.0123, 4.2e-8)] == [
        "230 µs", "1.50 s", "12.3 ms", "42.0 ns"]
    assert pages.fmt_energy(0.128) == "128 mJ" and pages.fmt_time(None) == "—"


def _files(values: dict[str, list], commit: str = "c" * 40, machine: str = "m1"
           ) -> data.ResultFile:
    row = {"result": [values[b] for b in ("tilelang", "triton", "torch")],
           "params": [["'square-4096'"], ["'fp16'"], ["'tilelang'", "'triton'", "'torch'"]]}
    return data.ResultFile(machine=machine, commit=commit, env_name="env", date=1,
                           label="x", results={"bench_gemm.GemmTime.track_time": row})


def test_head_to_head_figures_and_reasons() -> None:
    commit = "c" * 40
    rf = _files({"tilelang": 2.0e-4, "triton": None, "torch": 1.0e-4}, commit)
    recs = []
    for backend, tflops, gbps, schema in (("tilelang", 500.0, 2.0, "kperf-record-1"),
                                          ("torch", 1000.0, 10.0, "kperf-record-2")):
        r = _record(commit, schema, tflops=tflops, gbps=gbps)
        r["params"]["backend"] = backend
        r["_schema_version"] = data.RECORD_SCHEMAS[schema]
        recs.append(r)
    views = headtohead.build({"m1": {"gpu": "G"}}, [rf], {}, recs)
    (table,) = views[0].tables
    (case, dtype, cells) = table.rows[0]
    tl, tr, torch = cells
    assert (case, dtype) == ("square-4096", "fp16")
    assert tl.time_s == 2.0e-4 and tl.vs_torch == pytest.approx(0.5)
    assert tl.roof_frac == pytest.approx(0.5) and tl.roof_kind == "compute"
    assert tl.energy_j is None and "before schema 2" in tl.energy_why
    assert torch.energy_j == 0.06 and torch.roof_frac == pytest.approx(1.0)
    assert tr.status == "failed" and "asv keeps no error text" in tr.reason
    assert views[0].compute_roofs["fp16"].value == 1000.0
    assert "best GB/s any kernel" in views[0].bandwidth_roof.source
    html = headtohead.render(views, data.Notes(), "https://h/commit/", {})
    assert 'data-v="0.0002"' in html and "200 µs" in html and "0.50×" in html
    cpu = headtohead.build({"cpu": {"gpu": "none"}}, [], {}, [])
    assert "has no GPU" in cpu[0].why_empty


def test_head_to_head_takes_an_unchanged_baseline_from_the_commit_that_timed_it() -> None:
    """``--baseline changed`` leaves torch untimed (a skip) at a commit where nothing its
    timing depends on changed: the page takes its latest timed point and says where from."""
    older, newer = "a" * 40, "b" * 40
    files = [_files({"tilelang": 2.0e-4, "triton": 3.0e-4, "torch": 1.0e-4}, older),
             _files({"tilelang": 2.5e-4, "triton": 3.0e-4, "torch": float("nan")}, newer)]
    recs = [_record(older, backend="x") | {"params": {"case": "square-4096", "dtype": "fp16",
                                                      "backend": "torch"}}]
    views = headtohead.build({"m1": {"gpu": "G"}}, files, {}, recs,
                             revisions={older: 1, newer: 2})
    (table,) = views[0].tables
    tl, _, torch = table.rows[0][2]
    assert table.commit == newer and tl.time_s == 2.5e-4
    assert torch.status == "ok" and torch.time_s == 1.0e-4 and torch.timed_at == older
    assert torch.n_records == 1  # the records of the commit that timed it
    assert tl.vs_torch == pytest.approx(0.4) and "timed at aaaaaaaa" in tl.vs_torch_why
    html = headtohead.render(views, data.Notes(), "https://h/commit/", {})
    assert "@aaaaaaaa" in html and "0.40×*" in html
    # timed at the latest commit: that point, no note
    files[1] = _files({"tilelang": 2.5e-4, "triton": 3.0e-4, "torch": 1.2e-4}, newer)
    views = headtohead.build({"m1": {"gpu": "G"}}, files, {}, recs,
                             revisions={older: 1, newer: 2})
    tl, _, torch = views[0].tables[0].rows[0][2]
    assert torch.time_s == 1.2e-4 and not torch.timed_at and not tl.vs_torch_why


def test_everything_generated_is_escaped(tmp_path: Path) -> None:
    commit = "d" * 40
    rf = _files({"tilelang": 1e-4, "triton": 1e-4, "torch": 1e-4}, commit, machine=HOSTILE)
    rf.results["bench_gemm.GemmTime.track_time"]["params"][0] = [repr(HOSTILE)]
    views = headtohead.build({HOSTILE: {"gpu": HOSTILE}}, [rf], {}, [])
    notes = data.Notes([(HOSTILE, HOSTILE)])
    html = headtohead.render(views, notes, "https://h/commit/",
                             {commit: {"subject": HOSTILE, "time": 0}})
    assert "<script>window" not in html and "<img src=x" not in html
    assert html.count("&lt;script&gt;window.__x=1&lt;/script&gt;") >= 4
    rep = {"schema": "kperf-gate-2", "status": HOSTILE, "exit_code": 1, "label": HOSTILE,
           "summary": HOSTILE, "base": "not-a-sha<b>", "head": commit, "machine": HOSTILE,
           "cases": [{"case": HOSTILE, "env": HOSTILE, "verdict": HOSTILE, "reason": HOSTILE,
                      "ratio": 1.2, "ci": [1.1, 1.3], "before": 1e-3, "after": 1.2e-3,
                      "unit": "seconds", "extra_field_of_a_later_schema": [1]}],
           "_markdown": HOSTILE, "_source": HOSTILE, "_mtime": 0.0, "_id": "r1"}
    page = gatepages.report_page(rep, "https://h/commit/")
    assert "<script>window" not in page and "<img src=x" not in page
    assert "1.20 ms" in page and "[1.1000, 1.3000]" in page
    index = gatepages.write(tmp_path, [rep], {"classes": {HOSTILE: {"doc": HOSTILE}}},
                            data.Notes(), "")
    assert "<script>window" not in index.read_text()
    rec = _record(commit)
    rec["machine"] = rec["benchmark"] = HOSTILE
    tele = telemetry_pages.write_telemetry_pages(tmp_path, records=[rec]).read_text()
    assert "<script>window" not in tele and tele.count("</script>") == 2


# ----------------------------------------------------------------- asv's pages offline


def test_vendored_assets_replace_every_cdn_url(tmp_path: Path) -> None:
    source = needs_assets()
    report, replaces = asv_pages.vendor(tmp_path, source)
    assert report.ok, report.problems
    text, missing = asv_pages.rewrite_index((ASV_WWW / "index.html").read_text(), replaces)
    assert missing == [] and "//cdn" not in text and "code.jquery.com" not in text
    for rel in replaces.values():
        assert (tmp_path / rel).is_file() and f'"{rel}"' in text
    licences = (tmp_path / "vendor" / "LICENSES.txt").read_text()
    assert licences.count("== ") == 6 and "Permission is hereby granted" in licences
    (tmp_path / "index.html").write_text(text)
    assert asv_pages.external_references(tmp_path) == []


def test_a_tampered_asset_vendors_nothing(tmp_path: Path) -> None:
    source = needs_assets()
    fake = tmp_path / "node_modules"
    subprocess.run(["cp", "-r", str(source), str(fake)], check=True)
    (fake / "jquery" / "dist" / "jquery.min.js").write_text("alert(1)")
    report, replaces = asv_pages.vendor(tmp_path / "html", fake)
    assert not report.ok and replaces == {} and not (tmp_path / "html").exists()
    assert any("sha256 differs" in p for p in report.problems)


def test_asv_graph_code_takes_every_patch() -> None:
    text, problems = asv_pages.patch_graphdisplay((ASV_WWW / "graphdisplay.js").read_text())
    assert problems == []
    assert text.count("window.kperfPoint") == 4 and "kperf_state: item[2]" in text
    index, problems = asv_pages.inject((ASV_WWW / "index.html").read_text())
    assert problems == [] and 'href="kperf/head-to-head.html"' in index
    _, problems = asv_pages.patch_graphdisplay("var x;")
    assert len(problems) == 4


# ----------------------------------------------------------------- publishing


def test_swap_replaces_the_live_site_whole(tmp_path: Path) -> None:
    live, build = tmp_path / "html", tmp_path / ".html.build-1"
    live.mkdir()
    (live / "old.txt").write_text("old")
    build.mkdir()
    (build / "new.txt").write_text("new")
    publish.swap_in(build, live)
    assert sorted(p.name for p in live.iterdir()) == ["new.txt"] and not build.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["html"]


def _broken_history(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q",
                    "--allow-empty", "-m", "one"], cwd=repo, check=True)
    (repo / "asv.conf.json").write_text(json.dumps({
        "version": 1, "project": "p", "repo": ".", "branches": ["main"],
        "results_dir": ".asv/results", "html_dir": "html"}))
    m = repo / ".asv" / "results" / "m1"
    m.mkdir(parents=True)
    (m / "machine.json").write_text(json.dumps({"machine": "m1", "version": 1}))
    (repo / ".asv" / "results" / "benchmarks.json").write_text('{"version": 2, "bench')
    return repo


def test_a_failing_asv_publish_keeps_the_old_site(tmp_path: Path) -> None:
    repo = _broken_history(tmp_path)
    (repo / "html").mkdir()
    (repo / "html" / "index.html").write_text("the old site")
    assert publish.publish(repo) == 1
    assert (repo / "html" / "index.html").read_text() == "the old site"
    assert [p.name for p in repo.iterdir() if p.name.startswith(".html")] == []


def test_a_failing_asv_publish_without_a_site_leaves_an_explained_one(tmp_path: Path) -> None:
    repo = _broken_history(tmp_path)
    records = repo / ".asv" / "records" / "m1"
    records.mkdir(parents=True)
    (records / "r.json").write_text(json.dumps(_record()))
    assert publish.publish(repo) == 1
    status = (repo / "html" / "kperf" / "index.html").read_text()
    assert 'id="asv-failed"' in status and "asv publish exited" in status
    tele = json.loads((repo / "html" / "kperf" / "telemetry.json").read_text())
    assert len(tele["points"]) == 1
    assert "kperf/index.html" in (repo / "html" / "index.html").read_text()


def test_keep_gate_copies_the_report(tmp_path: Path) -> None:
    src = tmp_path / "out"
    src.mkdir()
    (src / "gate.json").write_text(json.dumps({"schema": "kperf-gate-1", "label": "sm 90/x",
                                               "head": "f" * 40, "cases": []}))
    (src / "gate.md").write_text("md")
    dest = publish.keep_gate(src, tmp_path)
    assert re.fullmatch(r"sm_90_x-ffffffff-\d{8}T\d{6}Z", dest.name)
    assert (dest / "gate.md").read_text() == "md"
    reps = data.read_gate_reports([tmp_path / ".asv" / "gate-reports"], data.Notes())
    assert len(reps) == 1 and reps[0]["label"] == "sm 90/x"


def test_cli_help_names_the_main_modes() -> None:
    out = subprocess.run([sys.executable, "-m", "tools.publish", "--help"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    assert "--keep-gate" in out and "--pack-records" in out and "--records" in out


# ----------------------------------------------------------------- steps and their causes


def _step_files(values: list[float]) -> list[data.ResultFile]:
    return [_files({"tilelang": v, "triton": 1e-4, "torch": 1e-4}, c * 40)
            for c, v in zip("abc", values, strict=True)]


def _capped(commit: str, clock: float, bits: int = 0x4, energy_j: float = 0.06) -> dict:
    rec = _record(commit, energy_per_call_j=energy_j)
    rec["params"]["backend"] = "tilelang"
    for w in rec["measurement"]["windows"]:
        w.update(sm_clock_mhz_median=clock, power_w_mean=690.0, throttle_bits_or=bits)
    rec["measurement"]["windows"] = [dict(w) for w in rec["measurement"]["windows"]]
    return rec


def test_a_step_is_explained_from_the_records_either_side() -> None:
    """asv's jump (None, rev): its commit and the latest earlier commit with a value; the
    clock drop at the power limit is the code's, a thermal bit makes it the environment's,
    a commit without records leaves the cause unknown."""
    from tools.gate.config import Thresholds
    from tools.site import steps

    a, b, c = "a" * 40, "b" * 40, "c" * 40
    files = _step_files([2.0e-4, 2.0e-4, 2.2e-4])
    history = steps.History(files, {}, [_capped(b, 1400.0), _capped(c, 1270.0, energy_j=0.066)],
                            {a: 0, b: 1, c: 2})
    name = "bench_gemm.GemmTime.track_time('square-4096', 'fp16', 'tilelang')"
    graph = "graphs/arch-x86_64/branch-main/machine-m1/bench_gemm.GemmTime.track_time.json"
    regressions = {"regressions": [[name, graph, {}, 0, 2.2e-4, 2.0e-4,
                                    [[None, 2, 2.0e-4, 2.2e-4], [0, 2, 2.0e-4, 2.2e-4]]],
                                   ["a later asv's shape"]]}
    th = Thresholds.load(REPO / "thresholds.json")
    found = steps.find_steps(regressions, {"0": a, "1": b, "2": c}, ["m1", "m10"], history,
                             th, {r"^bench_gemm\.": 0.025})
    one, ranged = found
    assert (one.before.commit, one.after.commit) == (b, c) and one.machine == "m1"
    assert one.time_ratio == pytest.approx(1.1) and one.threshold == 0.025
    assert one.cause == "code" and one.text == ("x1.100, energy +10.0%, clock 1400 → 1270 MHz "
                                                "at the 700 W limit: the code's own")
    assert (ranged.before.commit, ranged.cause) == (a, "unknown")
    assert "no record with clock readings before the step" in ranged.why
    history = steps.History(files, {}, [_capped(b, 1400.0), _capped(c, 1270.0, 0x4 | 0x20)],
                            {a: 0, b: 1, c: 2})
    (hot, _) = steps.find_steps(regressions, {"0": a, "1": b, "2": c}, ["m1"], history, th)
    assert hot.cause == "environment" and "0x20" in hot.why and hot.threshold is None
    assert steps.machine_of(graph, ["m10", "m1"]) == "m1"


def test_steps_and_their_causes_are_escaped() -> None:
    from tools.site import steps

    step = steps.Step(HOSTILE, HOSTILE, "b", {}, steps.Side("d" * 40), steps.Side(HOSTILE),
                      1, cause="environment", why=HOSTILE, text=HOSTILE, id="x")
    html = headtohead.steps_table(HOSTILE, [step], "https://h/commit/")
    assert "<script>window" not in html and "<img src=x" not in html
    assert html.count("&lt;script&gt;window.__x=1&lt;/script&gt;") >= 3


# ----------------------------------------------------------------- the codegen page


def _codegen_view(tmp_path: Path) -> codegen.MachineView:
    """The real records of tests/data/codegen-records.json, read back from where the
    suites keep them."""
    codegen_fixture.place(codegen_fixture.load(), tmp_path / ".asv", "c" * 40, "cpu")
    notes = data.Notes()
    recs = data.read_records(codegen.roots_beside([tmp_path / ".asv" / "records"]), notes)
    assert notes.items == [] and {r["kind"] for r in recs} == {"codegen", "compile"}
    (view,) = codegen.build(recs, {})
    return view


def _fixture_records(kind: str, target: str, backend: str, toolchain: str = "clang19",
                     op: str = "") -> list[dict]:
    """The fixture's records of one target and backend (sm_90a: one per environment)."""
    return [r for r in codegen_fixture.load() if r["kind"] == kind
            and r["benchmark"].startswith(op) and r["params"]["target"] == target
            and r["params"]["backend"] == backend and r["env_name"].endswith(toolchain)]


def _fixture_record(kind: str, op: str, target: str, backend: str) -> dict:
    (rec,) = _fixture_records(kind, target, backend, op=f"bench_{op}.")
    return rec


def test_codegen_page_sets_every_op_beside_triton(tmp_path: Path) -> None:
    view = _codegen_view(tmp_path)
    assert view.commit == "c" * 40 and view.machine == "cpu"
    assert [g.label for g in view.groups] == ["gfx942 · clang19", "gfx942 · rocm-7.2.2",
                                              "sm_90a"]
    assert [t.op for t in view.tables] == list(codegen_fixture.OPS)
    gfx942 = [g for g in view.groups if g.target == "gfx942"]
    for table in view.tables:
        for g in gfx942:
            for backend in codegen.BACKENDS:
                cell = table.cells[(g, backend)]
                for key in ("registers", "sgprs", "vgpr_spills", "shared_bytes", "occupancy",
                            "code_bytes", "isa.instructions"):
                    assert isinstance(codegen.value(cell, key), int), (table.op, g, backend, key)
                assert cell.compile_s and cell.compile_s > 0
    gemm = view.tables[codegen_fixture.OPS.index("gemm")]
    summary = codegen_page.op_summary(gemm, view.groups)
    clang19 = gfx942[0]
    for backend in codegen.BACKENDS:
        rec = _fixture_record("codegen", "gemm", "gfx942", backend)
        assert gemm.cells[(clang19, backend)].figures == rec["figures"]
        reads = {k: v for k, v in rec["figures"].items() if k.startswith("isa.lds_read.")}
        widest = max(reads, key=reads.get)
        said = (f"{codegen_page.NAMES[backend]} {widest.rsplit('.', 1)[1]}-bit {reads[widest]} of "
                f"{sum(reads.values())}")
        assert any(line.startswith("LDS reads") and said in line for line in summary)
        timed = _fixture_record("compile", "gemm", "gfx942", backend)
        seconds = statistics.median(timed["samples"])
        assert gemm.cells[(clang19, backend)].compile_s == seconds
        compile_line = next(x for x in summary if x.startswith("compile (gfx942 · clang19)"))
        assert f"{codegen_page.NAMES[backend]} {pages.fmt_num(seconds, 2)} s" in compile_line
    sm90 = gemm.cells[(view.groups[-1], "tilelang")]
    assert sm90.figures == _fixture_records("codegen", "sm_90a", "tilelang", op="bench_gemm.")[
        0]["figures"]
    claims = codegen_page.claims(view.tables, view.groups)
    wide = {}
    for b in codegen.BACKENDS:
        figs = [r["figures"] for r in _fixture_records("codegen", "gfx942", b)]
        every = sum(v for f in figs for k, v in f.items() if k.startswith("isa.lds_read."))
        wide[b] = f"{sum(f.get('isa.lds_read.128', 0) for f in figs)} of {every}"
    assert f"gfx942 · clang19: LDS reads that are 128-bit, static counts over all ops: " \
           f"TileLang {wide['tilelang']} (" in "\n".join(claims)
    assert f"; Triton {wide['triton']} (" in next(c for c in claims if "clang19: LDS reads" in c)
    times = {b: {r["benchmark"]: statistics.median(r["samples"])
                 for r in _fixture_records("compile", "gfx942", b)} for b in codegen.BACKENDS}
    faster = sum(times["tilelang"][k] < times["triton"][k] for k in times["tilelang"])
    assert f"gfx942 · clang19: TileLang compiled to a code object faster than Triton in " \
           f"{faster} of 7 ops" in claims[0]
    html = codegen_page.render([view], data.Notes(), "", {})
    assert html.count('<table class="codegen"') == 7


def _cg(kind: str, commit: str, target: str, backend: str, **extra) -> dict:
    suite = "CodeSize.track_value" if kind == "codegen" else "Compile.track_compile"
    rec = {"schema": "kperf-record-2", "benchmark": f"bench_gemm.Gemm{suite}", "kind": kind,
           "params": {"target": target, "dtype": "fp16", "backend": backend},
           "machine": "m1", "commit": commit, "env_name": "env-" + str(extra.get("toolchain")),
           "recorded_at": 1.0}
    return rec | extra


def test_codegen_page_says_where_each_figure_is_from_and_why_one_is_missing() -> None:
    old, new = "a" * 40, "b" * 40
    figures = {"registers": 144, "occupancy": 3, "occupancy_limit": "VGPRs",
               "isa.lds_read.16": 32, "isa.lds_read.128": 4, "isa.matrix": 32}
    recs = [_cg("codegen", new, "gfx942", "tilelang", toolchain="clang19", op="gemm",
                case="square-4096", figures=figures, recorded_at=2.0),
            _cg("codegen", old, "gfx942", "triton", toolchain="clang19", op="gemm",
                case="square-4096", figures={"registers": 200}),
            _cg("codegen", old, "gfx942", "tilelang", toolchain="rocm-7.2.2", op="gemm",
                case="square-4096", figures=figures | {"registers": 148}),
            _cg("compile", old, "gfx942", "tilelang", toolchain="clang19",
                samples=[1.0, 3.0, 2.0]),
            _cg("compile", new, "gfx942", "tilelang", toolchain="rocm-7.2.2", samples=[9.0]),
            _cg("codegen", new, "sm_90a", "triton", op="gemm", case="square-4096",
                figures={"registers": 168}),
            _cg("compile", new, "sm_90a", "triton", samples=7.0, _source="odd.json"),
            _cg("codegen", new, "sm_90a", "tilelang", figures=["not", "a", "dict"],
                _source="odder.json")]
    notes = data.Notes()
    (view,) = codegen.build(recs, {old: 1, new: 2}, notes)
    assert [where for where, _ in notes.items] == ["odd.json", "odder.json"]
    clang19, rocm, sm90 = view.groups
    assert view.commit == new and view.group_commit[rocm] == old
    (table,) = view.tables
    tl = table.cells[(clang19, "tilelang")]
    assert tl.compile_s == 2.0 and tl.compile_at == old  # unchanged since, timed there
    assert table.cells[(rocm, "tilelang")].compile_s is None  # a later commit's is not its own
    assert codegen.value(tl, "isa.lds_read.64") == 0 and codegen.value(tl, "agprs") is None
    triton = table.cells[(clang19, "triton")]
    assert triton.figures is None and "no CodeSize record of triton" in triton.why
    assert "TileLang by toolchain: clang19 144 VGPRs, occupancy 3; rocm-7.2.2 148 VGPRs, " \
           "occupancy 3" in codegen_page.op_summary(table, view.groups)
    html = codegen_page.render([view], data.Notes(), "https://h/commit/", {})
    assert "@aaaaaaaa" in html and 'data-v="2.0"' in html
    assert "not among this record&#x27;s figures" in html
    assert codegen.value(table.cells[(sm90, "triton")], "isa.matrix") is None
    assert "no instruction mix in this record" in html


def test_codegen_page_escapes_what_records_say() -> None:
    rec = _cg("codegen", "c" * 40, "gfx942", "tilelang", toolchain=HOSTILE, op=HOSTILE,
              case=HOSTILE, figures={"registers": 1, "occupancy": 8, "occupancy_limit": HOSTILE,
                                     HOSTILE: HOSTILE})
    rec["machine"] = rec["env_name"] = HOSTILE
    views = codegen.build([rec], {})
    html = codegen_page.render(views, data.Notes([(HOSTILE, HOSTILE)]), "https://h/commit/",
                               {"c" * 40: {"subject": HOSTILE, "time": 0}})
    assert "<script>window" not in html and "<img src=x" not in html
    assert html.count("&lt;script&gt;window.__x=1&lt;/script&gt;") >= 8
