"""The published site's parts without a browser (kperf/site/publish.py, kperf/site/): tolerant
readers, commit links, offline assets, asv's patched graph code, the atomic swap and an
asv publish that fails. tests/test_site_pages.py has the pages' figures and escaping,
tests/test_site_codegen.py the codegen page, tests/test_site_browser.py renders the whole
site in Chromium."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kperf.history import records_archive
from kperf.site import asv_pages, data, gatepages, publish, repo_data

from ._site import _record
from .conftest import REPO

ASV_WWW = Path(__import__("asv").__file__).parent / "www"
ASSETS = REPO / ".cache" / "site-assets" / "node_modules"


def needs_assets() -> Path:
    """The site's pinned assets that setup installed (tools/setup_env.sh runs
    kperf/site/install_assets.sh); a test run itself downloads nothing (issue 45)."""
    if not (ASSETS / "jquery" / "package.json").exists():
        pytest.skip(f"site assets not installed under {ASSETS}: run bash tools/setup_env.sh "
                    f"(it runs kperf/site/install_assets.sh, with npm and the registry)")
    return ASSETS


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
    assert records_archive.pack(root, "m1", out) == 1
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
        "version": 2, "commit_hash": "a" * 40, "env_name": "env", "date": 5,
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
    assert repo_data.web_url_of_remote(remote) == web


def test_commit_link_settings_take_precedence(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "remote", "add", "origin", "git@gitlab.com:g/k.git"], cwd=tmp_path,
                   check=True)
    monkeypatch.delenv("KPERF_COMMIT_URL", raising=False)
    assert repo_data.commit_links(tmp_path, {"show_commit_url": "#"})[:2] == (
        "https://gitlab.com/g/k/-/commit/", "https://gitlab.com/g/k")
    assert repo_data.commit_links(tmp_path, {"show_commit_url": "https://x/c/"})[0] == "https://x/c/"
    monkeypatch.setenv("KPERF_COMMIT_URL", "https://intranet/kperf/commit/")
    assert repo_data.commit_links(tmp_path, {})[0] == "https://intranet/kperf/commit/"
    monkeypatch.delenv("KPERF_COMMIT_URL")
    subprocess.run(["git", "remote", "remove", "origin"], cwd=tmp_path, check=True)
    url, _, how = repo_data.commit_links(tmp_path, {})
    assert url == "" and how.startswith("none")


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
    dest = gatepages.keep_gate(src, tmp_path)
    assert re.fullmatch(r"sm_90_x-ffffffff-\d{8}T\d{6}Z", dest.name)
    assert (dest / "gate.md").read_text() == "md"
    reps = repo_data.read_gate_reports([tmp_path / ".asv" / "gate-reports"], data.Notes())
    assert len(reps) == 1 and reps[0]["label"] == "sm 90/x"


def test_cli_help_names_the_main_modes() -> None:
    out = subprocess.run([sys.executable, "-m", "kperf.site.publish", "--help"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    assert "--keep-gate" in out and "--records" in out


@pytest.mark.parametrize("catch_all, said", [
    (False, r"no rule matches case \"bench_gemm\.GemmOccupancy"),
    (True, r"no rule marks bench_gemm\.GemmOccupancy\.track_value higher-is-better"),
])
def test_a_rule_typo_that_loses_the_occupancy_falls_is_an_error(tmp_path: Path,
                                                                catch_all: bool,
                                                                said: str) -> None:
    """Issue 51: with the occupancy rule's match misspelled, the series match no rule, or
    a catch-all of a lower-is-better class, and no fall would ever be flagged; publish
    must say so (it exits 1 with the message on the status page), not go quiet."""
    from kperf.config import ConfigError
    from kperf.project import DEFAULTS
    from kperf.site import falls

    th = json.loads((DEFAULTS / "thresholds.json").read_text())
    for rule in th["rules"]:
        rule["match"] = rule["match"].replace("Occupancy", "Ocupancy")
    if catch_all:
        th["rules"].append({"match": ".*", "class": "static"})
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps(th))
    html = tmp_path / "html"
    html.mkdir()
    (html / "index.json").write_text(json.dumps({"benchmarks": {
        "bench_gemm.GemmOccupancy.track_value": {"params": [["'gfx942'"], ["'fp16'"],
                                                            ["'tilelang'"]]}}}))
    (html / "regressions.json").write_text(json.dumps({"regressions": []}))
    with pytest.raises(ConfigError, match=said):
        falls.add_falls(html, {}, path, tmp_path)
    assert falls.add_falls(html, {}, DEFAULTS / "thresholds.json", tmp_path) == []
