"""asv 0.6.6's pages made to work without the internet and to link to kperf's pages.

- ``vendor``: copies every script, style sheet and font asv's index.html loads from a CDN
  out of the pinned npm packages (kperf/site/package-lock.json, installed by
  kperf/site/install_assets.sh), checks each file's sha256 against kperf/site/assets.json,
  writes html/vendor/LICENSES.txt, and rewrites the tags to the local copies.
- ``inject``: adds kperf's navigation entries and kperf/site/kperf-asv.js (point tooltip
  with clock, power and throttle state; a click on a point opens its telemetry row).
- ``patch_graphdisplay``: three exact edits of asv's graphdisplay.js that hand the hovered
  or clicked point's series to kperf-asv.js. asv is pinned (pyproject.toml), and an edit
  whose anchor is not found is reported, never guessed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "assets.json"
VENDOR = "vendor"
# a tag that makes the browser fetch (a plain <a href> does not)
EXTERNAL = re.compile(r"""<(?:script|link|img|iframe|source|embed|object|audio|video)\b[^>]*?"""
                      r"""\b(?:src|href|data)\s*=\s*["']?(?:https?:)?//""", re.I)


@dataclass
class AssetReport:
    ok: bool
    source: str
    copied: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def assets_dir() -> Path:
    """``KPERF_SITE_ASSETS`` (a node_modules folder), else the project's
    .cache/site-assets/node_modules (kperf/site/install_assets.sh puts them there)."""
    explicit = os.environ.get("KPERF_SITE_ASSETS")
    if explicit:
        return Path(explicit)
    from kperf import project

    try:
        root = project.find().root
    except project.ProjectError:
        root = Path.cwd()
    return root / ".cache" / "site-assets" / "node_modules"


def manifest() -> dict:
    return json.loads(MANIFEST.read_text())


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def vendor(html_dir: Path, source: Path | None = None) -> tuple[AssetReport, dict[str, str]]:
    """Copy the pinned assets into ``html_dir/vendor``. Returns the report and the map
    {CDN URL: local path relative to html_dir}; nothing is copied unless every file is
    there with its pinned hash (a half-vendored page would still call out)."""
    source = source or assets_dir()
    report = AssetReport(ok=False, source=str(source))
    plan: list[tuple[Path, str]] = []
    replaces: dict[str, str] = {}
    licences: list[str] = []
    for pkg in manifest()["packages"]:
        root = source / pkg["name"]
        try:
            version = json.loads((root / "package.json").read_text()).get("version")
        except (OSError, ValueError):
            report.problems.append(f"{pkg['name']}: not installed under {source}")
            continue
        if version != pkg["version"]:
            report.problems.append(f"{pkg['name']}: {version} installed, {pkg['version']} pinned")
            continue
        for f in pkg["files"]:
            src = root / f["path"]
            rel = f"{VENDOR}/{pkg['name']}/{f['path']}"
            if not src.is_file():
                report.problems.append(f"{pkg['name']}/{f['path']}: missing")
            elif _sha256(src) != f["sha256"]:
                report.problems.append(f"{pkg['name']}/{f['path']}: sha256 differs from the pin")
            else:
                plan.append((src, rel))
                if f.get("replaces"):
                    replaces[f["replaces"]] = rel
        text = [f"== {pkg['name']} {pkg['version']} (npm), licence: {pkg['license']}"]
        if pkg.get("licence_note"):
            text.append(pkg["licence_note"])
        for name in pkg.get("licence_files", []):
            try:
                text.append((root / name).read_text())
            except OSError:
                report.problems.append(f"{pkg['name']}/{name}: licence file missing")
        licences.append("\n".join(text))
    if report.problems:
        return report, {}
    for src, rel in plan:
        dest = html_dir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        report.copied.append(rel)
    (html_dir / VENDOR / "LICENSES.txt").write_text(
        "Third-party files in this folder, copied from pinned npm packages "
        "(kperf: kperf/site/assets.json, kperf/site/package-lock.json).\n\n"
        + "\n\n".join(licences) + "\n")
    report.ok = True
    return report, replaces


_TAG = re.compile(r"<(script|link)\b[^>]*?(?:src|href)=\"(https?://[^\"]+)\"[^>]*>", re.I)


def rewrite_index(text: str, replaces: dict[str, str]) -> tuple[str, list[str]]:
    """asv's CDN tags -> local files (integrity/crossorigin dropped: same origin). Returns
    the text and the URLs no local file replaces."""
    missing: list[str] = []

    def sub(m: re.Match[str]) -> str:
        kind, url = m.group(1).lower(), m.group(2)
        local = replaces.get(url)
        if local is None:
            missing.append(url)
            return m.group(0)
        if kind == "script":
            return f'<script src="{local}" onerror="js_load_failure()">'
        return f'<link rel="stylesheet" href="{local}">'

    return _TAG.sub(sub, text), missing


NAV_ANCHOR = '<li id="nav-li-regressions"><a href="#/regressions">Regressions</a></li>'
NAV_KPERF = (
    '<li id="nav-li-kperf-h2h"><a href="kperf/head-to-head.html" title="TileLang, Triton and '
    'torch per case">Head to head</a></li>'
    '<li id="nav-li-kperf-codegen"><a href="kperf/codegen.html" title="registers, LDS, '
    'occupancy, instruction mix and compile time, TileLang beside Triton">Codegen</a></li>'
    '<li id="nav-li-kperf-telemetry"><a href="kperf/telemetry.html" title="clock, power and '
    'throttle state of every timed point">Clocks</a></li>'
    '<li id="nav-li-kperf-gate"><a href="kperf/gate/index.html" title="the PR gate\'s kept '
    'reports and thresholds">Gate</a></li>'
    '<li id="nav-li-kperf-status"><a href="kperf/index.html" title="what this site holds, '
    'what it lacks and why">Status</a></li>')
HOOK_TAGS = ('<link href="kperf/kperf-asv.css" rel="stylesheet" type="text/css"/>'
             '<script src="kperf/kperf-asv.js"></script>')


def inject(text: str) -> tuple[str, list[str]]:
    """kperf's nav entries and hook script into asv's index.html."""
    problems = []
    if NAV_ANCHOR in text:
        text = text.replace(NAV_ANCHOR, NAV_ANCHOR + NAV_KPERF, 1)
    else:
        problems.append("asv's navigation anchor not found: no kperf entries in its nav bar")
    if "</head>" in text:
        text = text.replace("</head>", HOOK_TAGS + "</head>", 1)
    else:
        problems.append("no </head> in asv's index.html: kperf's graph hook not loaded")
    return text, problems


GRAPH_PATCHES = (
    ("series state",
     re.compile(r"all\.push\(\[\$\.asv\.graph_to_path\(current_benchmark, perm\),\s*"
                r"graph_contents\]\);"),
     "all.push([$.asv.graph_to_path(current_benchmark, perm), graph_contents, perm]);"),
    ("series params",
     re.compile(r"label: graph_content\[1\],"),
     "label: graph_content[1], kperf_state: item[2], kperf_perm: graph_content[0],"),
    ("tooltip",
     re.compile(r'\$\.asv\.pretty_unit\(y, unit\) \+ " @ " \+ commit_hash\);'),
     '$.asv.pretty_unit(y, unit) + " @ " + commit_hash + (window.kperfPoint ? '
     "window.kperfPoint.tooltip(current_benchmark, item, commit_hash, x_coordinate_axis)"
     ' : ""));'),
    ("click",
     re.compile(r"window\.open\(\s*\$\.asv\.main_json\.show_commit_url \+ previous_hash,"
                r"\s*'_blank'\);"),
     "if (!(window.kperfPoint && window.kperfPoint.click(current_benchmark, item, "
     "previous_hash, x_coordinate_axis))) { window.open($.asv.main_json.show_commit_url "
     "+ previous_hash, '_blank'); }"),
)


def patch_graphdisplay(text: str) -> tuple[str, list[str]]:
    problems = []
    for name, pattern, new in GRAPH_PATCHES:
        text, n = pattern.subn(lambda _m, new=new: new, text, count=1)
        if n != 1:
            problems.append(f"graphdisplay.js: the {name} anchor was not found (asv changed?)"
                            "; graph points do not show kperf's figures")
    return text, problems


def external_references(html_dir: Path) -> list[str]:
    """Every tag attribute in the site's HTML, JS and CSS that loads from another host."""
    found = []
    for path in sorted(html_dir.rglob("*")):
        if path.suffix not in (".html", ".js", ".css") or VENDOR in path.relative_to(
                html_dir).parts[:1]:
            continue
        text = path.read_text(errors="replace")
        for m in EXTERNAL.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{path.relative_to(html_dir).as_posix()}:{line}")
        if path.suffix == ".css":
            found += [f"{path.relative_to(html_dir).as_posix()}: {u}" for u in
                      re.findall(r"url\(\s*['\"]?(?:https?:)?//[^)]*\)", text)]
    return found


def make_offline(html_dir: Path, source: Path | None = None) -> tuple[AssetReport, list[str]]:
    """Vendor, rewrite, inject and patch asv's pages in ``html_dir``. Returns the asset
    report and the problems (each a sentence for the status page)."""
    report, replaces = vendor(html_dir, source)
    absent = [p for p in report.problems if ": not installed under " in p]
    problems = [p for p in report.problems if p not in absent]
    if absent:
        problems.append(f"the site's pinned scripts are not installed ({len(absent)} packages "
                        f"missing under {absent[0].split(' under ', 1)[1]}): `kperf publish "
                        "--install-assets` installs them (npm), or set KPERF_SITE_ASSETS to "
                        "a node_modules folder that has them (docs/site.md)")
    index = html_dir / "index.html"
    text = index.read_text()
    if report.ok:
        text, missing = rewrite_index(text, replaces)
        problems += [f"index.html still loads {u}: no pinned file replaces it" for u in missing]
    text, injected = inject(text)
    problems += injected
    index.write_text(text)
    gd = html_dir / "graphdisplay.js"
    if gd.exists():
        patched, gproblems = patch_graphdisplay(gd.read_text())
        gd.write_text(patched)
        problems += gproblems
    (html_dir / "kperf").mkdir(exist_ok=True)
    for name in ("kperf-asv.js", "kperf-asv.css"):
        shutil.copyfile(HERE / name, html_dir / "kperf" / name)
    return report, problems
