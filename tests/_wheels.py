"""The wheels a test run installs, downloaded before it: after setup, the tests need no
network (issue 45).

Tests build asv environments (asv's virtualenv plugin installs ``wheel`` and ``pip>=8``
into each, then asv.conf.json's ``pip+`` pins, asv_runner) and the stack matrix test
installs a second Triton release into one. ``tools/test.sh`` runs
``python -m tests._wheels`` before pytest (with the network setup has), which downloads
what is missing into ``.cache/test-wheels``; tests/conftest.py then sends every pip of the
run there, with no package index (``PIP_NO_INDEX``, ``PIP_FIND_LINKS``).
"""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WHEELS = REPO / ".cache" / "test-wheels"
# the Triton releases of tests/test_stack_matrix.py's real matrix
MATRIX_TRITON = ("3.7.1", "3.8.0")
# what asv installs into every environment it makes (``pip install wheel pip>=8``; the
# environment's own pip is new enough): a release without dependencies
ASV_SEEDS = ("wheel==0.45.1",)


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def requirements() -> list[str]:
    """``name==version`` of every wheel a test run installs from an index: asv's own,
    asv.conf.json's ``pip+`` pins, and the matrix test's Triton releases other than
    .venv's own (the matrix links that one in, kperf/stacks/matrix.py)."""
    from kperf.gate.asvio import load_project_conf

    req = load_project_conf(REPO / "asv.conf.json").get("matrix", {}).get("req", {})
    pins = [*ASV_SEEDS, *(f"{name[4:]}=={v}" for name, versions in req.items()
                          if name.startswith("pip+") for v in versions)]
    pins += [f"triton=={v}" for v in MATRIX_TRITON if v != _installed("triton")]
    return sorted(pins)


def have(pin: str) -> bool:
    name, version = pin.split("==")
    stem = f"{name.replace('-', '_')}-{version}-"
    return any(p.name.startswith(stem) for p in WHEELS.glob("*.whl"))


def main() -> int:
    missing = [pin for pin in requirements() if not have(pin)]
    if not missing:
        return 0
    print(f"downloading the test run's wheels into {WHEELS}: {' '.join(missing)}")
    WHEELS.mkdir(parents=True, exist_ok=True)
    # with their dependencies: pip has no index to find those in during the run
    return subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary",
                           ":all:", "-d", str(WHEELS), *missing]).returncode


if __name__ == "__main__":
    sys.exit(main())
