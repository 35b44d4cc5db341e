"""What an offline GPU runner needs, downloaded for its Python and platform: the one
offline bundler.

    kperf bundle --out .gpu                  # cp312, manylinux x86_64
    kperf bundle --out .gpu --python-version 3.11
    kperf bundle --wheels --out wh triton==3.8.0 asv==0.6.6   # a wheel folder, for pip

A GPU runner whose image already holds torch and Triton (the H200's, a ROCm image) lacks
TileLang and asv, and cannot reach an index. This downloads, for that runner's Python and
platform (wheels only, never built here), the pinned packages of ``kperf/stacks/offline-bundle.txt``
and writes:

- ``OUT/site.tar.xz``: the wheels unpacked into one folder, which
  ``tools/offline_env.sh`` unpacks and puts on ``PYTHONPATH`` (TileLang and its native
  dependencies, asv and its dependencies). z3's command-line binary is dropped (TileLang
  loads only the library) and ``libz3.so`` is linked to the versioned name TileLang's
  extension was linked against.
  The site's scripts, styles and fonts (the pinned npm packages of kperf/site/assets.json,
  as installed under ``.cache/site-assets/node_modules`` or ``KPERF_SITE_ASSETS``, each file
  checked against its pin) go in too, under ``kperf-site-assets/``, where
  ``tools/offline_env.sh`` points ``KPERF_SITE_ASSETS``: the site published on the runner
  loads nothing from another host.
- ``OUT/asvwhl/``: the wheels asv installs into each of its environments (asv_runner,
  Pympler), for ``PIP_FIND_LINKS``.

Then, on the runner: ``source tools/offline_env.sh OUT/site.tar.xz OUT/asvwhl`` (docs/perf.md
says which commands reproduce its figures).

``--wheels`` downloads the given requirements (``--no-deps`` as listed) into ``OUT/`` with
``OUT/SHA256SUMS``: carry the folder, check it with ``sha256sum -c SHA256SUMS`` and point
pip at it (``PIP_NO_INDEX=1 PIP_FIND_LINKS=OUT``), as docs/stacks.md does for a ROCm image.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from kperf.site import asv_pages

REQUIREMENTS = Path(__file__).resolve().parent / "offline-bundle.txt"
# Wheels asv installs into every environment it creates (its own runner and Pympler).
ENV_WHEELS = ("asv_runner", "pympler")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64")
Z3_SONAME = "libz3.so.4.15"
SITE_ASSETS = "kperf-site-assets"  # in the bundle; tools/offline_env.sh names it too


class BundleError(RuntimeError):
    """The bundle cannot be made as asked; the message says what is missing."""


def pip_download_command(requirements: Sequence[str], dest: Path, python_version: str,
                         platforms: Sequence[str] = PLATFORMS, no_deps: bool = True,
                         python: str = sys.executable) -> list[str]:
    """The ``pip download`` of wheels (never a build) for another platform and Python."""
    if not requirements:
        raise BundleError("no requirements given")
    if not re.fullmatch(r"\d+(\.\d+)?", python_version):
        raise BundleError(f"--python-version {python_version!r}: expected e.g. 3.12")
    cmd = [python, "-m", "pip", "download", "--only-binary=:all:", "--dest", str(dest)]
    for platform in platforms:
        cmd += ["--platform", platform]
    cmd += ["--python-version", python_version, "--implementation", "cp"]
    if no_deps:  # e.g. TileLang on an image that has torch: its deps are listed by hand
        cmd.append("--no-deps")
    return cmd + list(requirements)


def read_requirements(path: Path) -> list[str]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError as err:
        raise BundleError(f"{path}: requirements file not found") from err
    return [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]


def download(requirements: list[str], dest: Path, python_version: str,
             no_deps: bool = True) -> list[Path]:
    cmd = pip_download_command(requirements, dest, python_version, no_deps=no_deps)
    subprocess.run(cmd, check=True)
    return sorted(dest.glob("*.whl"))


def wheel_folder(out: Path, requirements: list[str], python_version: str,
                 no_deps: bool) -> Path:
    """``out``/ the wheels and SHA256SUMS (``sha256sum -c`` checks a carried copy)."""
    wheels = download(requirements, out, python_version, no_deps)
    sums = "".join(f"{hashlib.sha256(w.read_bytes()).hexdigest()}  {w.name}\n"
                   for w in wheels)
    (out / "SHA256SUMS").write_text(sums)
    return out


def unpack(wheels: list[Path], site: Path) -> None:
    """Unzip every wheel into ``site`` (what ``pip install --target`` would lay out)."""
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site)
    for data in site.glob("z3_solver-*.data"):
        shutil.rmtree(data / "data" / "bin", ignore_errors=True)
    lib = site / "z3" / "lib"
    if (lib / "libz3.so").exists() and not (lib / Z3_SONAME).exists():
        (lib / Z3_SONAME).symlink_to("libz3.so")
    for top in site.iterdir():  # unzip drops the executable bit of native helpers
        if top.is_dir():
            for path in top.rglob("*.so*"):
                path.chmod(0o755)


def add_site_assets(site: Path, source: Path) -> Path:
    """Copy the site's pinned assets from ``source`` (a node_modules folder) into
    ``site/kperf-site-assets`` (package.json, licence files and pinned files of each
    package), then check that the copy serves a whole offline site."""
    dest = site / SITE_ASSETS
    for pkg in asv_pages.manifest()["packages"]:
        names = ["package.json", *pkg.get("licence_files", []), *(f["path"] for f in pkg["files"])]
        for name in names:
            src = source / pkg["name"] / name
            if src.is_file():
                (dest / pkg["name"] / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dest / pkg["name"] / name)
    with tempfile.TemporaryDirectory(prefix="kperf-assets-") as html:
        report, _ = asv_pages.vendor(Path(html), dest)
    if not report.ok:
        shutil.rmtree(dest, ignore_errors=True)
        raise BundleError(f"the site's assets (kperf/site/assets.json) are not all under "
                          f"{source}: {'; '.join(report.problems)}. Install them with "
                          f"`bash kperf/site/install_assets.sh` (npm) or set KPERF_SITE_ASSETS")
    return dest


def pack(site: Path, bundle: Path) -> None:
    """``site``'s entries into ``bundle`` (tar.xz), written beside it and renamed in."""
    partial = bundle.with_suffix(".partial")
    with tarfile.open(partial, "w:xz", preset=6) as tar:
        for entry in sorted(site.iterdir()):
            tar.add(entry, arcname=entry.name)
    partial.replace(bundle)


def is_env_wheel(wheel: Path) -> bool:
    return wheel.name.split("-")[0].lower() in ENV_WHEELS


def build(out: Path, python_version: str, requirements_file: Path = REQUIREMENTS) -> Path:
    requirements = read_requirements(requirements_file)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kperf-bundle-") as tmp:
        work = Path(tmp)
        add_site_assets(work / "site", asv_pages.assets_dir())  # before the long download
        wheels = download(requirements, work / "wheels", python_version)
        asvwhl = out / "asvwhl"
        shutil.rmtree(asvwhl, ignore_errors=True)
        asvwhl.mkdir()
        for wheel in wheels:
            if is_env_wheel(wheel):
                shutil.copy2(wheel, asvwhl / wheel.name)
        unpack(wheels, work / "site")
        bundle = out / "site.tar.xz"
        pack(work / "site", bundle)
    return bundle


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(".gpu"), help="default .gpu/")
    parser.add_argument("--python-version", default="3.12", help="the runner's (default 3.12)")
    parser.add_argument("-r", "--requirements", type=Path, default=REQUIREMENTS)
    parser.add_argument("--wheels", action="store_true",
                        help="only download REQUIREMENT... into --out, with SHA256SUMS")
    parser.add_argument("--deps", action="store_true",
                        help="with --wheels: their dependencies too (default: as listed)")
    parser.add_argument("requirement", nargs="*", help="with --wheels: what to download")
    args = parser.parse_args(argv)
    try:
        if args.wheels:
            reqs = args.requirement or read_requirements(args.requirements)
            folder = wheel_folder(args.out.resolve(), reqs, args.python_version, not args.deps)
            print(f"wheels: {folder} ({len(list(folder.glob('*.whl')))}; SHA256SUMS)")
            return 0
        bundle = build(args.out.resolve(), args.python_version, args.requirements)
    except (BundleError, subprocess.CalledProcessError) as err:
        print(f"bundle: {err}", file=sys.stderr)
        return 1
    size = bundle.stat().st_size / 2**20
    print(f"bundle: {bundle} ({size:.1f} MiB); asv's environment wheels: {args.out / 'asvwhl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
