"""Codegen and compile records for the codegen page's tests (tests/test_site*.py).

``tests/data/codegen-records.json`` holds real records: the ``<Op>CodeSize`` and
``<Op>Compile`` suites of benchmarks/ run by hand (not through asv) on the CPU machine,
every op for gfx942 and sm_90a, both languages, under two gfx942 toolchains, as two asv
environments would (``kperf.core.hip``). Regenerate them with

    .venv/bin/python -m tests.codegen_fixture --toolchains clang19 rocm-7.2.2

(a few minutes on 2 cores; the compile times are of a shared, loaded machine). The tests
place them at a commit of their own history with ``place``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from kperf.site import codegen

FIXTURE = Path(__file__).with_name("data") / "codegen-records.json"
OPS = ("attention", "fp8_gemm", "gemm", "layernorm", "rmsnorm", "softmax", "swiglu")
ENV_PREFIX = "virtualenv-py3.11-asv_runner0.3.2-KPERF_ROCM_TOOLCHAIN"
COMPILE_REPEAT = 2


def load() -> list[dict[str, Any]]:
    return json.loads(FIXTURE.read_text())["records"]


def place(records: list[dict[str, Any]], root: Path, commit: str, machine: str) -> Path:
    """Write ``records`` as ``.asv/codegen-records`` and ``.asv/compile-records`` under
    ``root`` would hold them, at ``commit`` on ``machine``; returns ``root``."""
    for i, rec in enumerate(records):
        rec = rec | {"commit": commit, "machine": machine}
        folder = codegen.CODEGEN_DIR if rec["kind"] == "codegen" else codegen.COMPILE_DIR
        path = (root / folder / machine / f"{commit[:8]}-{rec['env_name']}" / rec["benchmark"]
                / f"{i:04d}.{int(rec['recorded_at'] * 1e9)}.1.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rec, indent=1, sort_keys=True))
    return root


def _suites(op: str) -> tuple[type, type]:
    module = importlib.import_module(f"benchmarks.bench_{op}")
    prefix = next(n.removesuffix("CodeSize") for n in vars(module) if n.endswith("CodeSize"))
    return getattr(module, f"{prefix}CodeSize"), getattr(module, f"{prefix}Compile")


def _run_env(toolchain: str) -> None:
    """Every op's CodeSize and Compile suites in this process, as asv would in one env."""
    for op in OPS:
        code_size, compile_suite = _suites(op)
        targets, dtypes, backends = code_size.params
        for target in targets:
            for dtype in dtypes:
                for backend in backends:
                    timing = compile_suite()
                    timing.repeat = COMPILE_REPEAT
                    try:
                        timing.setup(target, dtype, backend)
                        timing.track_compile(target, dtype, backend)
                        code_size().setup(target, dtype, backend)
                    except Exception as err:  # the fixture goes on; the log names it
                        print(f"{toolchain} {op} {target} {dtype} {backend}: {err}",
                              file=sys.stderr)


def generate(toolchains: list[str]) -> None:
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="kperf-codegen-fixture-") as tmp:
        for toolchain in toolchains:
            env = {"KPERF_ROCM_TOOLCHAIN": toolchain, "ASV_COMMIT": commit,
                   "ASV_ENV_NAME": ENV_PREFIX + toolchain, "ASV_ENV_DIR": tmp,
                   "KPERF_MACHINE": "cpu-fixture", "KPERF_COMPILE": "every",
                   "KPERF_RECORD_DIR": f"{tmp}/records"}
            subprocess.run([sys.executable, "-m", "tests.codegen_fixture", "--one-env"],
                           env=os.environ | env, check=True)
        records = [json.loads(p.read_text()) for folder in (codegen.CODEGEN_DIR,
                                                            codegen.COMPILE_DIR)
                   for p in sorted(Path(tmp, folder).rglob("*.json"))]
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps({
        "doc": "real records of the CodeSize and Compile suites, made by "
               "`python -m tests.codegen_fixture` (tests/codegen_fixture.py)",
        "made_at_commit": commit, "records": records}, indent=1, sort_keys=True) + "\n")
    print(f"{len(records)} records -> {FIXTURE}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toolchains", nargs="+", default=["clang19", "rocm-7.2.2"])
    parser.add_argument("--one-env", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one_env:
        _run_env(os.environ["KPERF_ROCM_TOOLCHAIN"])
    else:
        generate(args.toolchains)
    return 0


if __name__ == "__main__":
    sys.exit(main())
