"""What a timing depends on, and whether this machine has timed it already.

A digest names everything a figure depends on besides the machine: an op's kernel
sources and compilers (``kernel_source_digest``, which also keys the static figures'
cache), a cold compile's (``compile_digest``), a baseline's (``baseline_digest``), a
TileLang or Triton case's timing (``kernel_digest``). Under the "changed" policy a suite
skips a case this machine timed at another commit with the same digest
(``timed_elsewhere``).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path
from typing import Any

from kperf.core import amdgpu_disasm, codeobj, hip, record, static
from kperf.ops.files import digest_files, op_files, package_dir, package_files

# When an op's baseline (torch) is timed: "changed" (default) at a commit where what its
# timing depends on (baseline_digest) differs from every earlier measurement on this
# machine; "every" at every commit. Its code is the yardstick, not the code under test
# (the PR gate leaves it out too), and it was 71 of the 213 timed cases of a run.
BASELINE_POLICY = "KPERF_BASELINE"
# When an op's compile suite times its cold compiles: "changed" (default) at a commit where
# what a compile depends on (compile_digest) differs from every earlier timing on this
# machine; "every" at every commit. A compile's time follows its source and compiler, and
# the seven compile suites were ~200 s of a run whose kernels had not changed.
COMPILE_POLICY = "KPERF_COMPILE"
# When a TileLang or Triton case is timed: "every" (default) at every commit, as the
# nightly history is meant to; "changed" only at a commit where what its timing depends
# on (kernel_digest) differs from every earlier timing on this machine. A kernel whose
# code, compilers, measuring code, stack, plan and GPU are all the same can only read
# the run-to-run spread again (up to 4.6% for a graph-replayed 8 us RMSNorm between two
# runs of one commit, H200 vm-nvidia-h200-eb9ed144, 2026-12-04, docs/journal/2026-12-04.md
# "Afternoon of 2026-12-04"),
# and timing every case took ~10.9 min a commit (docs/perf.md): "changed" is for a long
# range of commits, e.g. a day's merges, where most touch one op or none.
KERNEL_POLICY = "KPERF_KERNELS"
TIMING_POLICIES = ("changed", "every")
POLICY_DEFAULTS = {BASELINE_POLICY: "changed", COMPILE_POLICY: "changed",
                   KERNEL_POLICY: "every"}
COMPILERS = ("triton", "tilelang", "apache-tvm-ffi")  # the distributions that make the code
# The compile timing (``_CompileTime``) and what it runs (``_static.device_artifacts``).
COMPILE_TIMING_CODE = ("cpu.py", "static.py")


def timing_policy(variable: str) -> str:
    """``changed`` or ``every``, from the environment variable (BASELINE_POLICY,
    COMPILE_POLICY or KERNEL_POLICY; POLICY_DEFAULTS where it is not set)."""
    policy = os.environ.get(variable, POLICY_DEFAULTS[variable])
    if policy not in TIMING_POLICIES:
        raise ValueError(f"{variable}={policy!r}: expected one of {TIMING_POLICIES}")
    return policy


def timed_elsewhere(policy: str, benchmark: str, params: dict[str, Any], key_field: str,
                    key: str, root: Path | None = None) -> str | None:
    """The commit (8 characters) at which this machine timed ``benchmark(params)`` with the
    same key, if the policy lets that timing stand for this commit's; else None. A commit
    that timed it before is timed again: a rerun replaces a measurement, never blanks it."""
    if timing_policy(policy) == "every":
        return None
    commit = record.commit_id() or ""
    same = [r for r in record.machine_records(benchmark, params, root)
            if r.get(key_field) == key and (r.get("measurement") or r.get("samples"))]
    if not same or any(r.get("commit") == commit for r in same):
        return None
    return str(same[-1].get("commit") or "?")[:8]


def baseline_digest(op_name: str, plan: dict[str, Any], root: Path | None = None) -> str:
    """What the timing of an op's baseline depends on besides the machine: the op's files
    without its compiled backends' modules (kperf/ops/files.py), the measuring code
    (kperf.core, kperf/suites/case.py), torch's version, the plan the case is measured
    with (its class's precision and placements included), and the GPU's identity as its
    telemetry gives it (driver, power limit)."""
    import hashlib

    from kperf.ops.registry import get_op

    digest = hashlib.sha256()
    _hash_code(digest, op_name, get_op(op_name).baseline, root)
    _hash_measuring(digest)
    digest.update(json.dumps(plan, sort_keys=True).encode())
    return digest.hexdigest()[:20]


def kernel_digest(op_name: str, backend: str, plan: dict[str, Any],
                  root: Path | None = None) -> str:
    """What the timing of one TileLang or Triton backend of an op depends on besides the
    machine: the op's files without its other compiled backends' modules, the compilers
    (Triton, TileLang, apache-tvm-ffi), the measuring code (kperf.core, kperf/suites/case.py
    and the input sets of kperf/suites/inputs.py), torch's version, the GPU's identity as
    its telemetry gives it, and the plan the case is measured with. Hashed once a process
    for each op, backend and plan: asv sets a suite's cases up one after another in one
    process, and the files cannot change under a run (``_kernel_digest.cache_clear``)."""
    return _kernel_digest(op_name, backend, json.dumps(plan, sort_keys=True), root)


@functools.cache
def _kernel_digest(op_name: str, backend: str, plan_json: str, root: Path | None) -> str:
    import hashlib

    digest = hashlib.sha256()
    _hash_code(digest, op_name, backend, root)
    _hash_versions(digest, COMPILERS)
    _hash_nvcc(digest)  # TileLang's CUDA code is nvcc's
    _hash_measuring(digest)
    digest_files(digest, Path(__file__).parent, [Path(__file__).with_name("inputs.py")])
    digest.update(plan_json.encode())
    return digest.hexdigest()[:20]


def _hash_measuring(digest: Any) -> None:
    """The measuring code (kperf.core, kperf/suites/case.py), torch's version and the GPU's
    identity (driver, power limit) as its telemetry gives it."""
    from kperf import core
    from kperf.core.telemetry import open_source

    core_dir = Path(core.__file__).parent
    digest_files(digest, core_dir.parent, [*core_dir.rglob("*.py")])
    digest_files(digest, Path(__file__).parent, [Path(__file__).with_name("case.py")])
    _hash_versions(digest, ("torch",))
    source = open_source()
    try:
        identity = source.identity()
    finally:
        source.close()
    digest.update(json.dumps(identity, sort_keys=True, default=str).encode())


# The distributions that make a backend's device code.
BACKEND_COMPILERS = {"triton": ("triton",), "tilelang": ("tilelang", "apache-tvm-ffi")}


def compile_digest(op_name: str, backend: str, target: str, root: Path | None = None) -> str:
    """What one kernel's cold compile time depends on besides the host: its own source
    (the op's files less its other backends' modules), its compiler (Triton's version;
    TileLang's and apache-tvm-ffi's, with nvcc for sm_90a and the gfx942 toolchain for
    gfx942), the compile timing's code (COMPILE_TIMING_CODE) and Python. An edit of an
    op's TileLang kernel leaves its Triton kernel's digest as it was: re-timing an
    unchanged compile only adds the host's spread to its series (docs/perf.md)."""
    import hashlib

    digest = hashlib.sha256()
    _hash_code(digest, op_name, backend, root)
    _hash_versions(digest, BACKEND_COMPILERS.get(backend, COMPILERS))
    if backend == "tilelang" and target.startswith("sm_"):
        _hash_nvcc(digest)
    if backend == "tilelang" and target.startswith("gfx"):
        digest.update(hip.toolchain_identity(target).encode())
    for name in COMPILE_TIMING_CODE:
        digest.update(Path(__file__).with_name(name).read_bytes())
    digest.update(f"{target}\n{sys.version}".encode())
    return digest.hexdigest()[:20]


def kernel_source_digest(op_name: str, root: Path | None = None) -> str:
    """What an op's generated code depends on: its files (all its backends'), the
    compilers' versions, nvcc, the gfx942 toolchain that compiles TileLang's HIP source
    (``kperf.core.hip``) and the static figures' readers."""
    import hashlib

    digest = hashlib.sha256()
    _hash_code(digest, op_name, None, root)
    _hash_versions(digest, COMPILERS)
    _hash_nvcc(digest)
    for arch in ("gfx942", *sorted(hip.NEEDS_CLANG22)):
        digest.update(hip.toolchain_identity(arch).encode())
    for reader in (static, hip, codeobj, amdgpu_disasm):
        digest.update(Path(reader.__file__).read_bytes())
    return digest.hexdigest()[:20]


def _hash_code(digest: Any, op_name: str, backend: str | None, root: Path | None) -> None:
    """The files of the code under test that one backend of an op (None: all of them)
    runs, as this process imports them (the commit's in an asv environment; ``root``: the
    ops package at another folder), and kperf's op contract and compiler shims
    (kperf/ops), which make its device code too."""
    digest.update(f"{op_name}/{backend}\0".encode())
    for folder, paths in code_files(op_name, backend, root).items():
        digest_files(digest, folder, paths)
    ops_dir = Path(__file__).resolve().parent.parent / "ops"
    digest_files(digest, ops_dir, sorted(ops_dir.glob("*.py")))


def code_files(op_name: str, backend: str | None,
               root: Path | None = None) -> dict[Path, list[Path]]:
    """{package folder: the files of it that ``op_name``'s ``backend`` (None: every
    backend) runs}, for the project's ops package (at ``root``, default: as imported) and
    the packages under test. Every sub-folder of the ops package counts as an op's: a
    shared one is counted in where an op's files import it (kperf/ops/files.py)."""
    from kperf import project

    proj = project.find()
    root = root or package_dir(proj.ops)
    ops = [d.name for d in root.iterdir() if d.is_dir() and d.name != "__pycache__"]
    others = _other_backends(root, op_name, backend)
    out = {root: op_files(root, proj.ops, op_name, ops, others)}
    for package in proj.measured:
        if package != proj.ops:
            pkg_root = package_dir(package)
            out[pkg_root] = package_files(pkg_root)
    return out


def _other_backends(root: Path, op_name: str, backend: str | None) -> set[Path]:
    """The modules of the op's other compiled backends (their ``Backend.module``, and by
    the convention ``<backend>_*.py``): what ``backend``'s cases do not run."""
    from kperf.ops.registry import get_op

    if backend is None:
        return set()
    others = {f"{b}_" for b in BACKEND_COMPILERS if b != backend}
    found = {p for p in (root / op_name).glob("*.py") if p.name.startswith(tuple(others))}
    try:
        backends = get_op(op_name).backends
    except Exception:
        return found
    return found | {root.joinpath(*be.module.split(".")[1:]).with_suffix(".py")
                    for name, be in backends.items()
                    if name != backend and getattr(be, "module", "")}


def _hash_nvcc(digest: Any) -> None:
    nvcc = static.nvcc_path()
    digest.update(f"nvcc={nvcc}@{os.stat(nvcc).st_mtime_ns if nvcc else 0}".encode())


def _hash_versions(digest: Any, dists: tuple[str, ...]) -> None:
    import importlib.metadata

    for dist in dists:
        try:
            digest.update(f"{dist}=={importlib.metadata.version(dist)}".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{dist} absent".encode())
