"""Publish the site from what .asv holds, without running any benchmark.

    kperf publish                  # html/ from .asv: results, records, gate reports
    kperf publish --config C --html DIR --records DIR [--records DIR ...]
    kperf publish --keep-gate .asv/pr-results [--name NAME]   # keep a gate report

The new site is built beside the old one (``.html.build-PID``) and swapped in at the end
(one atomic rename on Linux), so a failure at any step leaves the old site as it was. In
it: asv's pages, made to work offline (kperf/site/asv_pages.py) and linked to kperf's
pages under ``kperf/``: head to head, clocks and power per point, gate reports, and the
site's status (what it lacks and why). A record, result or report that cannot be read is
skipped and listed on the pages. If ``asv publish`` itself fails and there is no old site,
the new one holds kperf's pages and the error. docs/site.md says more.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kperf.config import ConfigError
from kperf.gate.asvio import load_project_conf
from kperf.gate.errors import GateError
from kperf.paths import PathError, check_scratch
from kperf.site import (
    asv_pages,
    codegen,
    data,
    falls,
    gatepages,
    headtohead,
    repo_data,
    status,
    steps,
)

SITE_MARKS = ("index.html", "index.json", "kperf")  # what a folder publish made holds


def default_record_roots(repo: Path, results_dir: Path) -> list[Path]:
    """.asv/records (KPERF_RECORD_DIR if set), and records kept with the results
    (``<results>/records``: the nightly's history, loose or packed)."""
    roots = [Path(os.environ.get("KPERF_RECORD_DIR") or repo / ".asv" / "records")]
    kept = results_dir / "records"
    if kept.exists():
        roots.append(kept)
    return roots


def default_gate_dirs(repo: Path) -> list[Path]:
    return [repo / gatepages.KEEP_DIR, repo / ".asv" / "pr-results"]


# --------------------------------------------------------------------------- swap


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); False if unsupported."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(str(a)), at_fdcwd, os.fsencode(str(b)),
              rename_exchange) == 0


def swap_in(build: Path, live: Path) -> None:
    """Make ``build`` the live site; the old one is removed after the swap."""
    if not live.exists() and not live.is_symlink():
        os.rename(build, live)
        return
    if _exchange(build, live):
        shutil.rmtree(build, ignore_errors=True)  # now the old site
        return
    old = live.with_name(f".{live.name}.old-{os.getpid()}")
    os.rename(live, old)
    os.rename(build, live)
    shutil.rmtree(old, ignore_errors=True)


# --------------------------------------------------------------------------- publish


def _asv_publish(conf_path: Path, build: Path, env: dict[str, str] | None, cwd: Path
                 ) -> tuple[bool, str]:
    cmd = [sys.executable, "-m", "asv", "--config", str(conf_path), "publish", "--no-pull",
           "--html-dir", str(build)]
    print("+ asv publish --no-pull --html-dir " + build.name, flush=True)
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    out = (proc.stdout or "") + (proc.stderr or "")
    sys.stdout.write(out)
    if proc.returncode == 0 and (build / "index.html").exists():
        return True, ""
    tail = "\n".join(out.strip().splitlines()[-15:])
    return False, f"asv publish exited {proc.returncode}:\n{tail}"


def _set_links(build: Path, commit_url: str, project_url: str) -> None:
    index = build / "index.json"
    info = json.loads(index.read_text())
    info["show_commit_url"] = commit_url or "#"
    info["project_url"] = project_url or "#"
    index.write_text(json.dumps(info, separators=(",", ":")))


def _revisions(index: Path) -> dict[str, int]:
    """commit -> asv's revision number (its commit order), from the site's index.json."""
    try:
        r2h = json.loads(index.read_text()).get("revision_to_hash", {})
        return {h: int(r) for r, h in r2h.items()}
    except (OSError, ValueError, AttributeError):
        return {}


@dataclass(frozen=True)
class Layout:
    """Where publishing reads (the asv config, results, records, gate reports) and what
    it replaces (the site)."""

    conf_path: Path
    conf: dict[str, Any]
    live: Path
    results_dir: Path
    record_roots: list[Path]
    gate_roots: list[Path]


def layout(repo: Path, config: Path | None = None, html_dir: Path | None = None,
           records: Sequence[Path] | None = None, gate_dirs: Sequence[Path] | None = None
           ) -> Layout:
    """The folders of a publish, checked before anything is written or deleted: a
    ``GateError`` for an unreadable config, a ``PathError`` for a site folder that
    ``guard_site`` refuses."""
    conf_path = Path(config or repo / "asv.conf.json").resolve()
    conf = load_project_conf(conf_path)
    live = Path(html_dir or conf_path.parent / conf.get("html_dir", "html")).resolve()
    results_dir = (conf_path.parent / conf.get("results_dir", "results")).resolve()
    record_roots = list(records) if records is not None else default_record_roots(
        repo, results_dir)
    gate_roots = list(gate_dirs) if gate_dirs is not None else default_gate_dirs(repo)
    keep = {"published results": results_dir,
            "asv environments": (conf_path.parent / conf.get("env_dir", "env")).resolve(),
            "compile records": (repo / ".asv" / "compile-records").resolve(),
            **{f"records folder {r}": Path(r).resolve() for r in record_roots},
            **{f"gate reports folder {g}": Path(g).resolve() for g in gate_roots}}
    guard_site(live, keep, [repo, conf_path.parent, repo / ".asv"])
    return Layout(conf_path, conf, live, results_dir, record_roots, gate_roots)


def guard_site(live: Path, keep: dict[str, Path], roots: Sequence[Path]) -> None:
    """The old site is deleted once the new one is swapped in (``--html .asv/records``
    once replaced every record), so the site folder must not be, hold or lie in anything
    ``keep`` names, nor be or hold ``roots`` (the repository, ``.asv``), and if it exists
    it must be a site (asv's ``index.html`` or ``index.json``, or kperf's pages) or empty:
    never a folder of something else."""
    check_scratch(live, keep, "--html", not_above=roots)
    if live.is_dir() and any(live.iterdir()) and not any(
            (live / name).exists() for name in SITE_MARKS):
        raise PathError(f"--html {live} exists and is not a site (none of "
                        f"{', '.join(SITE_MARKS)}); refusing to replace it: choose another "
                        f"folder or remove it yourself")


def series_thresholds(repo: Path) -> tuple[dict[str, float], str]:
    """asv's ``regressions_thresholds`` for the project at ``repo``, each series its class's
    history threshold (kperf/site/series.py), and '' or why they could not be made."""
    from kperf import project
    from kperf.gate.config import Thresholds
    from kperf.site.series import regressions_thresholds
    from kperf.site.spreads import History

    try:
        proj = project.load(repo)
        gate = Thresholds.load(proj.thresholds)
        return regressions_thresholds(repo, gate, History.load(proj.history_thresholds)), ""
    except (ConfigError, project.ProjectError, RuntimeError, ValueError, OSError,
            ImportError) as err:
        return {}, f"the history's thresholds could not be made: {err}"


def publish_config(conf: dict[str, Any], conf_dir: Path, out: Path,
                   thresholds: dict[str, float]) -> Path:
    """The project's asv config as ``asv publish`` reads it here: every path absolute, and
    the series' thresholds, unless the config names its own (a project's choice, used as
    it stands: asv takes the largest threshold that matches, so the two would not mix)."""
    made = dict(conf)
    repo_url = str(conf.get("repo", "."))
    if "://" not in repo_url:
        made["repo"] = str((conf_dir / repo_url).resolve())
    for key, default in (("env_dir", "env"), ("benchmark_dir", "benchmarks"),
                         ("results_dir", "results"), ("html_dir", "html")):
        made[key] = str((conf_dir / conf.get(key, default)).resolve())
    made["regressions_thresholds"] = conf.get("regressions_thresholds") or thresholds
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(made, indent=1))
    return out


@dataclass
class Site:
    """What kperf's pages are built from, read once: the new site's folder, the project's
    links and thresholds, asv's results and kperf's records, and what could not be read."""

    build: Path
    conf: dict[str, Any]
    git_repo: Path
    th_path: Path
    record_roots: list[Path]
    commit_url: str
    records: list[dict[str, Any]] = field(default_factory=list)
    record_notes: data.Notes = field(default_factory=data.Notes)
    result_notes: data.Notes = field(default_factory=data.Notes)
    machines: dict[str, Any] = field(default_factory=dict)
    files: list[data.ResultFile] = field(default_factory=list)
    benchmarks: dict[str, Any] = field(default_factory=dict)
    revisions: dict[str, int] = field(default_factory=dict)

    @property
    def kperf(self) -> Path:
        return self.build / "kperf"

    def read(self, results_dir: Path) -> None:
        self.records = data.read_records(self.record_roots, self.record_notes)
        self.machines, self.files, self.benchmarks = data.read_results(results_dir,
                                                                       self.result_notes)
        self.revisions = _revisions(self.build / "index.json")


def _telemetry_pages(site: Site) -> int:
    """The telemetry page and points.json; the number of rows."""
    from kperf.site import telemetry_pages

    telemetry_pages.write_telemetry_pages(
        site.build, records=site.records, notes=site.record_notes,
        commit_url=site.commit_url, hash_length=int(site.conf.get("hash_length", 8) or 8))
    rows = telemetry_pages.rows_of(site.records)
    status.write_points(site.kperf / "points.json", rows, site.benchmarks, site.files)
    return len(rows)


def _head_to_head_page(site: Site) -> None:
    """The head-to-head page with the causes of the steps asv flagged (steps.json)."""
    views = headtohead.build(site.machines, site.files, site.benchmarks, site.records,
                             revisions=site.revisions)
    code_recs = data.read_records(codegen.roots_beside(site.record_roots), data.Notes())
    history = steps.History(site.files, site.benchmarks, site.records + code_recs,
                            site.revisions)
    found = steps.from_site(site.build, site.conf, list(site.machines), history,
                            site.th_path, site.result_notes)
    steps.write(site.kperf / "steps.json", found)
    subjects = repo_data.commit_subjects(site.git_repo,
                                         {t.commit for v in views for t in v.tables})
    notes = data.Notes(site.record_notes.items + site.result_notes.items)
    (site.kperf / "head-to-head.html").write_text(headtohead.render(
        views, notes, site.commit_url, subjects, found,
        site.conf.get("regressions_thresholds")))


def _codegen_page(site: Site) -> data.Notes:
    return codegen.write(site.kperf, codegen.roots_beside(site.record_roots), site.revisions,
                         site.commit_url, site.git_repo,
                         codegen.timings_beside(site.files, site.benchmarks, site.revisions))


def _gate_pages(site: Site, gate_roots: list[Path]) -> tuple[int, data.Notes]:
    """The kept gate reports' pages; how many, and what could not be read."""
    notes = data.Notes()
    reports = repo_data.read_gate_reports(gate_roots, notes)
    gatepages.write(site.kperf, reports, repo_data.read_thresholds(site.th_path, notes), notes,
                    site.commit_url)
    return len(reports), notes


def _asv_pages(site: Site, asv_ok: bool, asset_source: Path | None, project_url: str
               ) -> tuple[bool, list[str], list[str]]:
    """asv's pages in ``site.build`` made offline, with the falls flagged: (offline,
    problems, failures). Without asv's pages, a page that sends the reader to kperf's
    status page stands in."""
    build, problems, failures = site.build, [], []
    if not asv_ok:
        shutil.rmtree(build, ignore_errors=True)
        build.mkdir(parents=True)
        (build / "index.html").write_text(
            '<!DOCTYPE html><meta charset="utf-8"><title>kperf</title>'
            '<meta http-equiv="refresh" content="0; url=kperf/index.html">'
            '<a href="kperf/index.html">site status</a>\n')
        return True, problems, failures  # kperf's pages load nothing from elsewhere
    _set_links(build, site.commit_url, project_url)
    report, offline_problems = asv_pages.make_offline(build, asset_source)
    problems += offline_problems
    try:
        falls.add_falls(build, site.conf, site.th_path, site.git_repo)  # asv flags rises
    except ConfigError as err:
        failures.append(f"occupancy falls are not flagged: {err}")
    return report.ok, problems, failures


def publish(repo: Path, config: Path | None = None, html_dir: Path | None = None,
            records: Sequence[Path] | None = None, gate_dirs: Sequence[Path] | None = None,
            env: dict[str, str] | None = None, asset_source: Path | None = None) -> int:
    """Build the site beside ``html_dir`` and swap it in. 0: published; 1: asv publish
    failed (the old site is kept, or kperf's pages alone stand in for a missing one); 2: a
    site folder that overlaps what must be kept (``layout``), nothing done."""
    try:
        where = layout(repo, config, html_dir, records, gate_dirs)
    except GateError as err:  # an unreadable or malformed file, named
        print(f"publish: cannot read the asv config: {err}; the site is unchanged",
              file=sys.stderr)
        return 1
    except PathError as err:
        print(f"publish: {err}; nothing was written or deleted", file=sys.stderr)
        return 2
    conf, conf_dir, live = where.conf, where.conf_path.parent, where.live
    repo_url = str(conf.get("repo", "."))
    git_repo = repo if "://" in repo_url else (conf_dir / repo_url).resolve()
    build = live.with_name(f".{live.name}.build-{os.getpid()}")
    shutil.rmtree(build, ignore_errors=True)
    commit_url, project_url, commit_how = repo_data.commit_links(git_repo, conf)
    series, thresholds_problem = series_thresholds(repo)
    conf_path = publish_config(conf, conf_dir, repo / ".asv" / "publish.asv.conf.json", series)
    conf = {**conf, "regressions_thresholds": load_project_conf(conf_path)[
        "regressions_thresholds"]}
    asv_ok, asv_error = _asv_publish(conf_path, build, env, conf_dir)
    if not asv_ok and (live / "index.html").exists():
        shutil.rmtree(build, ignore_errors=True)
        print(f"publish: {asv_error}\nthe old site in {live} is kept as it was",
              file=sys.stderr)
        return 1

    site = Site(build, conf, git_repo, _thresholds_path(repo), where.record_roots, commit_url)
    offline, problems, failures = _asv_pages(site, asv_ok, asset_source, project_url)
    problems[:0] = [thresholds_problem] if thresholds_problem else []
    site.kperf.mkdir(exist_ok=True)
    site.read(where.results_dir)
    n_rows = _telemetry_pages(site)
    _head_to_head_page(site)
    codegen_notes = _codegen_page(site)
    n_reports, gate_notes = _gate_pages(site, where.gate_roots)

    lost = [f"{path} ({what})" for path, what in site.result_notes.items
            if path.startswith("results/")]
    if lost:
        failures.append(f"{len(lost)} results file(s) could not be read, so their data is "
                        f"missing from the graphs: {'; '.join(lost[:10])}")
    problems += failures
    leaks = asv_pages.external_references(build)
    if leaks:
        problems.append("pages that still load from another host: " + ", ".join(leaks[:20]))
        offline = False
    notes = data.Notes(site.record_notes.items + site.result_notes.items
                       + codegen_notes.items + gate_notes.items)
    (site.kperf / "index.html").write_text(status.render(status.SiteState(
        machines=site.machines, files=site.files, benchmarks=site.benchmarks,
        n_records=len(site.records), n_rows=n_rows, n_reports=n_reports, notes=notes,
        problems=problems, offline=offline, commit_url=commit_url, commit_how=commit_how,
        asv_ok=asv_ok, asv_error=asv_error)))

    swap_in(build, live)
    print(f"site: {live / 'index.html'}  (serve with: python -m asv preview)")
    print(f"  kperf pages: {live / 'kperf' / 'index.html'}; {len(site.records)} records, "
          f"{n_reports} gate reports, {len(notes)} files skipped")
    for problem in problems:
        print(f"  warning: {problem}", file=sys.stderr)
    if len(notes):
        print(f"  warning: {len(notes)} files skipped, listed on kperf/index.html",
              file=sys.stderr)
    if not asv_ok:
        print(f"publish: {asv_error}\nonly kperf's pages were published", file=sys.stderr)
        return 1
    if thresholds_problem:
        print(f"publish: {thresholds_problem}; no step was flagged", file=sys.stderr)
        return 1
    for failure in failures:
        print(f"publish: {failure}", file=sys.stderr)
    return 1 if failures else 0


def _thresholds_path(repo: Path) -> Path:
    """The gate's thresholds of the project at ``repo`` (its own, else kperf's defaults)."""
    from kperf import project

    try:
        return project.load(repo).thresholds
    except project.ProjectError:
        return project.DEFAULTS / "thresholds.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, help="asv config (default: asv.conf.json)")
    parser.add_argument("--html", type=Path, help="site folder (default: the config's html_dir)")
    parser.add_argument("--records", type=Path, action="append",
                        help="records folder or archive (repeatable; default: .asv/records "
                             "and <results>/records)")
    parser.add_argument("--gate-reports", type=Path, action="append",
                        help="folder of kept gate reports (repeatable; default: "
                             ".asv/gate-reports and .asv/pr-results)")
    parser.add_argument("--keep-gate", type=Path, metavar="DIR",
                        help="keep the gate report in DIR for the site, then publish")
    parser.add_argument("--name", help="name of the kept gate report")
    parser.add_argument("--install-assets", action="store_true",
                        help="first install the site's pinned scripts and styles into "
                             ".cache/site-assets (npm; once per lockfile)")
    args = parser.parse_args(argv)
    from kperf import project

    try:
        repo = project.find().root
    except project.ProjectError as err:
        print(f"publish: {err}", file=sys.stderr)
        return 2
    if args.install_assets:
        import subprocess

        script = Path(__file__).with_name("install_assets.sh")
        if subprocess.run(["bash", str(script)], cwd=repo).returncode:
            print("publish: the site's scripts could not be installed; publishing without "
                  "them", file=sys.stderr)
    if args.keep_gate:
        try:  # the site's folders first: nothing is kept for a site that cannot be made
            layout(repo, args.config, args.html, args.records, args.gate_reports)
            print(f"kept: {gatepages.keep_gate(args.keep_gate, repo, args.name)}")
        except (GateError, PathError) as err:
            print(f"publish: {err}; nothing was kept or published", file=sys.stderr)
            return 2
    return publish(repo, args.config, args.html, args.records, args.gate_reports)


if __name__ == "__main__":
    sys.exit(main())
