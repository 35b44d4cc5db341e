"""Shared fixtures. Caches go to a per-session temp dir so tests never touch ~/.triton.

What a test run shares with the rest of the machine, and how it stops sharing it (issue 45,
docs/reliability.md "Tests beside other runs"):
- its caches (Triton, TileLang, the fake ROCm tree, the static figures) are in one folder
  of this session's, removed when the session ends, SIGTERM included (a cancelled CI job);
  a session killed outright leaves it, and the next session removes it (its ``owner`` is
  gone); a pytest that a test starts (the mutation run) uses its parent's;
- a network, after setup: every HTTP(S) proxy points at a closed port, so a test that would
  download (pip, npm) fails at once, naming it, instead of depending on the network;
- the gfx942 toolchain a developer's shell may name (``KPERF_ROCM_TOOLCHAIN``): unset; a
  test that wants one names it;
- Ctrl-C: a process started in the background by a non-interactive shell ignores SIGINT,
  and so do its children. A test that interrupts a child with SIGINT starts it so
  (``ignore_sigint``) and the child restores Python's handler, as a terminal has it.

Between tests (``_no_import_leaks``): a test that loads a project of its own in this process
(``kperf.project.use_working_tree`` puts its root first on ``sys.path``) leaves neither that
entry nor the modules it imported from pytest's temporary folder; a later test's ``import
benchmarks`` found an earlier test's empty ``benchmarks`` package (32 failures when the
worker ran tests/test_traps.py first, 2026-12-07).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kperf.core.pidfile import alive, process_identity
from kperf.project import DEFAULTS

REPO = Path(__file__).resolve().parent.parent
CACHE_ENV = "KPERF_TEST_CACHE"
# this session's scratch folder, or the one of the session that started this pytest
_OWN_CACHE = not os.environ.get(CACHE_ENV)
CACHE_PREFIX, OWNER = "kperf-test-cache-", "owner"


def _sweep_dead_sessions() -> None:
    """The folders of this user's sessions that were killed outright (a SIGKILL cannot be
    caught), told by their owner: a process gone."""
    for path in Path(tempfile.gettempdir()).glob(f"{CACHE_PREFIX}*"):
        try:
            mine = path.lstat().st_uid == os.geteuid() and path.is_dir()
            identity = (path / OWNER).read_text().strip() if mine else ""
        except OSError:
            continue  # another user's, or one being made
        if identity and not alive(identity):
            shutil.rmtree(path, ignore_errors=True)


if _OWN_CACHE:
    _sweep_dead_sessions()
    os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix=CACHE_PREFIX)
    (Path(os.environ[CACHE_ENV]) / OWNER).write_text(process_identity(os.getpid()))
CACHE = Path(os.environ[CACHE_ENV])
os.environ.setdefault("TRITON_CACHE_DIR", str(CACHE / "triton"))
os.environ.setdefault("TILELANG_CACHE_DIR", str(CACHE / "tilelang"))
# kperf/suites/static.py keeps the static figures under $ASV_ENV_DIR (asv sets it in its
# benchmarks), else in a /tmp/kperf-static that every checkout shared
os.environ.setdefault("ASV_ENV_DIR", str(CACHE / "asv-env"))
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
# measurement workers that a tool the tests start makes without a folder named to it (the
# gate's: worker_dir() then made a /tmp/kperf-workers-* that stayed) live here, never in a
# folder of the developer's shell that another run's workers share; short: a socket path
# must fit AF_UNIX's 108 bytes
os.environ["KPERF_WORKER_DIR"] = tempfile.mkdtemp(prefix="w", dir=CACHE)
# the gfx942 toolchain setup_env.sh unpacked here, also for the clones tests make (asv
# loads kperf/core/ from a clone's working tree, which has no .cache of its own)
os.environ.setdefault("KPERF_ROCM_ROOT", str(REPO / ".cache" / "rocm-toolchain"))
os.environ.pop("KPERF_ROCM_TOOLCHAIN", None)
# no network after setup: a download fails at once (port 9, discard, is closed here)
DEAD_PROXY = "http://127.0.0.1:9"
for _name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
              "all_proxy"):
    os.environ[_name] = DEAD_PROXY
os.environ["no_proxy"] = os.environ["NO_PROXY"] = "localhost,127.0.0.1,::1"
# every pip of the run (asv's environments, the stack matrix) installs from the wheels that
# tools/test.sh downloaded before pytest (tests/_wheels.py), never from an index
os.environ["PIP_NO_INDEX"] = "1"
os.environ["PIP_FIND_LINKS"] = str(REPO / ".cache" / "test-wheels")
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


@contextlib.contextmanager
def restored_imports(scratch: Path) -> Iterator[None]:
    """Once the block ends, none of the ``sys.path`` entries and modules added meanwhile
    from ``scratch`` (a test's own project, under pytest's temporary folder). Only those:
    the repository and its ``.venv`` may themselves be in /tmp (a CI clone), and a module
    Triton or TileLang registers on first import must stay."""
    path, modules, root = list(sys.path), set(sys.modules), str(scratch)
    try:
        yield
    finally:
        sys.path[:] = [p for p in sys.path if p in path or not p.startswith(root)]
        for name in set(sys.modules) - modules:
            if (getattr(sys.modules[name], "__file__", None) or "").startswith(root):
                del sys.modules[name]


@pytest.fixture(autouse=True)
def _no_import_leaks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with restored_imports(tmp_path_factory.getbasetemp()):
        yield


def _left_running() -> dict[int, str]:
    """{pid: command} of the processes this session started that still run: each names
    this session's folder in its environment, as every process it started does."""
    marker, found = f"{CACHE_ENV}={CACHE}".encode(), {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(
                    b"\0", b" ").decode(errors="replace")[:160]
        except OSError:  # gone meanwhile, or another user's
            continue
    # this process's own helper, which ends with it
    return {pid: cmd for pid, cmd in found.items() if "multiprocessing.resource_tracker" not in cmd}


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (a cancelled job, ``timeout``) ends the session as Ctrl-C does, so that its
    folder and what its tests started are removed (``pytest_unconfigure``)."""
    if _OWN_CACHE:
        signal.signal(signal.SIGTERM, _interrupted)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for pid, command in _left_running().items() if _OWN_CACHE else ():
        terminalreporter.write_line(f"left running by a test, stopped now: {pid} {command}")


def pytest_unconfigure(config: pytest.Config) -> None:
    """The session's folder goes, and what its tests left running (a measurement worker
    in its idle time holds a GPU's memory). pytest's own tmp_path folders stay where pytest
    keeps its last three sessions' (under them a socket's path must stay short)."""
    if not _OWN_CACHE:
        return
    for pid in _left_running():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(CACHE, ignore_errors=True)


def pytest_report_header(config: pytest.Config) -> str | None:
    from tests import _wheels

    missing = [pin for pin in _wheels.requirements() if not _wheels.have(pin)]
    if missing:
        return (f"missing from {_wheels.WHEELS}: {' '.join(missing)}; the tests that build "
                f"asv environments fail without them: run .venv/bin/python -m tests._wheels")
    return None


def ignore_sigint() -> None:
    """A ``preexec_fn``: the child starts with SIGINT ignored, as a command that a
    non-interactive shell starts in the background (``cmd &``) does, whatever this pytest
    was started as. A test that sends SIGINT has its child restore Python's handler."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@functools.cache
def has_gpu() -> bool:
    """Asked once a GPU test is collected (importing torch takes seconds)."""
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA/ROCm GPU; run on the GPU machine")
    for item in items:
        if "gpu" in item.keywords and not has_gpu():
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


def _is_kernels(module: str) -> bool:
    return module == "kernels" or module.startswith("kernels.")


@pytest.fixture
def triton_interpreter(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Triton's interpreter in this process, for one test, and only for it.

    ``@triton.jit`` reads ``TRITON_INTERPRET`` when a module is imported, so a kernel module
    imported under it keeps interpreted kernels in ``sys.modules`` for the tests that
    follow (tests/test_compat_drift.py then failed with "'InterpretedFunction' object has
    no attribute 'cache_key'"). The test gets ``kernels`` imported afresh under the
    interpreter; afterwards the modules are those of before. Triton itself is imported
    first, with the interpreter off: its own ``@triton.jit`` helpers (``tl.cdiv``, ...)
    stay compilable for the tests that follow."""
    import triton.language  # noqa: F401

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    before = {name: module for name, module in sys.modules.items() if _is_kernels(name)}
    for name in before:
        del sys.modules[name]
    yield
    for name in [name for name in sys.modules if _is_kernels(name)]:
        del sys.modules[name]
    sys.modules.update(before)


@pytest.fixture(scope="module")
def th():
    """The gate's thresholds.json, as the gate reads it, and a last rule that judges a
    synthetic case of no op ('c0', bench_x.XTime...) as compute: the gate's tests of its
    statistics need no op behind their cases (a real case takes its op's class)."""
    return synthetic_thresholds()


def synthetic_thresholds(path: Path | None = None):
    """Thresholds (default: kperf's own) with the synthetic cases' catch-all rule."""
    import dataclasses
    import re

    from kperf.gate.config import Rule, Thresholds

    th = Thresholds.load(path or DEFAULTS / "thresholds.json")
    return dataclasses.replace(th, rules=(*th.rules, Rule(re.compile(synthetic()), "compute")))


def synthetic() -> str:
    """The names of the gate tests' synthetic cases: any but a real op's bench_<op>. case."""
    from kperf import testing

    return rf"^(?!bench_(?:{'|'.join(testing.ops(REPO))})\.)"


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch):
    """Real measurement workers in a private folder, started through a reaper
    (tests/_workers.py). tests/test_pidfile.py has a ``workers`` of its own."""
    from types import SimpleNamespace

    from kperf.core import worker
    from tests._workers import Workers

    w = Workers()
    monkeypatch.setenv("KPERF_WORKER_DIR", str(w.dir))
    monkeypatch.setattr(worker, "subprocess", SimpleNamespace(
        Popen=w.popen, DEVNULL=subprocess.DEVNULL, STDOUT=subprocess.STDOUT))
    yield w
    w.close()



@pytest.fixture
def cpu_bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, triton_interpreter: None):
    """The timed suites as asv drives them, on CPU: a real measurement worker running the
    Triton kernels under the interpreter, records under the returned folder."""
    import json

    from kperf.core.worker import retire
    from tests._bench import BENCH_PLAN

    # a short folder: a worker's socket path must fit AF_UNIX's 108 bytes
    workers = Path(tempfile.mkdtemp(prefix="kperf-ts-"))
    env = {"KPERF_DEVICE": "cpu", "KPERF_TELEMETRY": "none",
           "KPERF_WORKER_DIR": str(workers), "KPERF_WORKER_IDLE_S": "60",
           "KPERF_RECORD_DIR": str(tmp_path / "records"), "KPERF_MACHINE": "cpu-test",
           "ASV_COMMIT": "0123456789abcdef0123456789abcdef01234567",
           "ASV_ENV_NAME": "existing-py", "KPERF_PLAN": json.dumps(BENCH_PLAN)}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for key in ("KPERF_TARGET", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                "ROCR_VISIBLE_DEVICES", "KPERF_BASELINE", "KPERF_KERNELS"):
        monkeypatch.delenv(key, raising=False)
    yield tmp_path / "records"
    retire(workers)
    for path in workers.iterdir():
        path.unlink()
    workers.rmdir()


def synthetic_project(repo: Path) -> None:
    """A kperf project of no real op in ``repo``: kperf.toml naming an empty package, and
    thresholds.json with the synthetic cases' catch-all rule (``synthetic_thresholds``)."""
    import json

    (repo / "kperf.toml").write_text('[kperf]\nops = "toyops"\n')
    (repo / "toyops").mkdir(exist_ok=True)
    (repo / "toyops" / "__init__.py").write_text("")
    raw = json.loads((DEFAULTS / "thresholds.json").read_text())
    raw["rules"].append({"match": synthetic(), "class": "compute"})
    (repo / "thresholds.json").write_text(json.dumps(raw, indent=1))


def skip_without_every_target() -> None:
    """A skip (naming what lacks) where this machine cannot build every target's code."""
    from kperf.core.static import unavailable

    missing = {f"{t}/{b}": why for t in ("gfx942", "sm_90a") for b in ("tilelang", "triton")
               if (why := unavailable(t, b, "clang19"))}
    if missing:
        pytest.skip(f"this machine cannot build every target (tools/setup_env.sh): {missing}")
