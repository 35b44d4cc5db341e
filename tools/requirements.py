"""Print the pinned requirements of pyproject.toml extras, one per line (for setup_env.sh);
``deps`` names kperf's own dependencies.

    python tools/requirements.py deps stack dev
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path


def requirements(extras: list[str], pyproject: Path) -> list[str]:
    meta = tomllib.loads(pyproject.read_text())["project"]
    table = {"deps": meta["dependencies"], **meta["optional-dependencies"]}
    unknown = [e for e in extras if e not in table]
    if unknown:
        raise SystemExit(f"{pyproject}: no extra(s) {unknown}; known: {sorted(table)}")
    return [req for extra in extras for req in table[extra]]


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[1]
    print("\n".join(requirements(sys.argv[1:], root / "pyproject.toml")))
