"""The offline bundle (kperf/stacks/offline_bundle.py, unpacked by tools/offline_env.sh) carries the
site's scripts, styles and fonts, so that the site an offline GPU runner publishes loads
nothing from another host (issue 27: asv's pages fell to error.html there, the pinned npm
packages were not in the bundle)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kperf.stacks import offline_bundle

from .conftest import REPO
from .test_site import needs_assets

# a script or style sheet a page loads: <script src=...>, <link href=...>
LOADS = re.compile(r"""<(?:script|link)\b[^>]*?\b(?:src|href)\s*=\s*["']([^"']+)["']""", re.I)

PUBLISH = """
import sys
from pathlib import Path

sys.path.insert(0, sys.argv.pop(1))  # the repository
from kperf.site import asv_pages

asv_pages.DEFAULT_ASSETS = Path("/nonexistent")  # only the bundle's copy can serve
from kperf.site import publish

config, html, empty = sys.argv[1:]
sys.exit(publish.main(["--config", config, "--html", html, "--records", empty,
                       "--gate-reports", empty]))
"""


def _no_network() -> list[str]:
    """A command prefix that runs in a network namespace of its own (no interface but lo)."""
    prefix = ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-rn"]
    if shutil.which("unshare") is None or subprocess.run([*prefix, "true"]).returncode:
        pytest.skip("no network namespace here (unshare -n / -rn): cannot publish with "
                    "no network")
    return prefix


def _project(root: Path) -> Path:
    """An asv project with one commit and no results: asv publish still writes its pages."""
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.email=t@kperf", "-c", "user.name=t", "commit", "-q",
                    "--allow-empty", "-m", "one"], cwd=root, check=True)
    (root / "asv.conf.json").write_text(
        '{"version": 1, "project": "mini", "repo": ".", "branches": ["main"], '
        '"results_dir": "results", "html_dir": "html"}')
    (root / "results" / "m1").mkdir(parents=True)
    (root / "results" / "benchmarks.json").write_text('{"version": 2}')
    (root / "results" / "m1" / "machine.json").write_text('{"machine": "m1", "version": 1}')
    return root / "asv.conf.json"


def _not_local(html: Path) -> list[str]:
    """Every script or style sheet a page loads that is not a file of the site."""
    bad = []
    for page in html.rglob("*.html"):
        for ref in LOADS.findall(page.read_text(errors="replace")):
            path = ref.split("#", 1)[0].split("?", 1)[0]
            elsewhere = re.match(r"^([a-z][a-z0-9+.-]*:|//)", ref, re.I)
            if elsewhere or not (page.parent / path).is_file():
                bad.append(f"{page.relative_to(html)}: {ref}")
    return bad


def test_a_site_published_offline_from_the_bundle_loads_everything_from_itself(
        tmp_path: Path) -> None:
    source = needs_assets()
    bundled = offline_bundle.add_site_assets(tmp_path / "bundle-site", source)
    assert sorted(p.name for p in bundled.iterdir()) == sorted(
        pkg["name"] for pkg in offline_bundle.asv_pages.manifest()["packages"])
    bundle = tmp_path / "site.tar.xz"
    offline_bundle.pack(tmp_path / "bundle-site", bundle)
    config, html, empty = _project(tmp_path / "project"), tmp_path / "html", tmp_path / "none"
    empty.mkdir()
    (tmp_path / "wheels").mkdir()
    unpacked, publish = tmp_path / "runner-site", tmp_path / "publish.py"
    publish.write_text(PUBLISH)
    script = (f'source tools/offline_env.sh "{bundle}" "{tmp_path / "wheels"}"\n'
              'echo "assets=$KPERF_SITE_ASSETS"\n'
              f'"{sys.executable}" -c "import socket; print(socket.if_nameindex())"\n'
              f'"{sys.executable}" "{publish}" "{REPO}" "{config}" "{html}" "{empty}"\n')
    env = dict(os.environ, KPERF_SITE=str(unpacked))
    env.pop("KPERF_SITE_ASSETS", None)
    proc = subprocess.run([*_no_network(), "bash", "-c", script], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert f"assets={unpacked / 'kperf-site-assets'}" in out
    assert "[(1, 'lo')]" in out, "published with a network"
    assert "not installed" not in out and "warning" not in out, out
    assert (html / "index.html").is_file() and (html / "vendor" / "LICENSES.txt").is_file()
    assert _not_local(html) == []
    assert offline_bundle.asv_pages.external_references(html) == []
    assert "works offline" in (html / "kperf" / "index.html").read_text()


def test_a_bundle_without_the_sites_assets_is_refused_naming_what_is_missing(
        tmp_path: Path) -> None:
    source = needs_assets()
    partial = tmp_path / "node_modules"
    shutil.copytree(source, partial)
    shutil.rmtree(partial / "jquery")
    with pytest.raises(offline_bundle.BundleError, match=r"jquery: not installed under .*"
                                                         r"install_assets\.sh"):
        offline_bundle.add_site_assets(tmp_path / "site", partial)
    assert not (tmp_path / "site" / offline_bundle.SITE_ASSETS).exists()


def test_a_wheel_folder_is_downloaded_for_the_runner_with_its_checksums(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``kperf bundle --wheels``: pip download for the runner's platform and Python (wheels
    only, as listed), and SHA256SUMS that ``sha256sum -c`` checks on the runner."""
    calls: list[list[str]] = []

    def fake_pip(cmd: list[str], check: bool) -> None:
        calls.append(cmd)
        dest = Path(cmd[cmd.index("--dest") + 1])
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "triton-3.8.0-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"wheel")

    monkeypatch.setattr(offline_bundle.subprocess, "run", fake_pip)
    out = tmp_path / "wh"
    assert offline_bundle.main(["--wheels", "--out", str(out), "--python-version", "3.12",
                                "triton==3.8.0"]) == 0
    (cmd,) = calls
    assert cmd[cmd.index("--python-version") + 1] == "3.12" and "--no-deps" in cmd
    assert "--only-binary=:all:" in cmd and cmd[-1] == "triton==3.8.0"
    monkeypatch.undo()
    check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=out, capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "triton-3.8.0" in check.stdout
    monkeypatch.setattr(offline_bundle.subprocess, "run", fake_pip)
    assert offline_bundle.main(["--wheels", "--out", str(out), "--python-version", "3.x",
                                "triton"]) == 1  # refused, naming the option
