"""asv over real history: each commit is measured with its own kernel code.

A temporary clone gets a second commit that changes the GEMM's gfx942 tile (block_K
32 -> 64). asv builds and installs the kernels package per commit while the measuring
code comes from the working tree, so the recorded LDS figure must double at the second
commit, and the register figure of the Triton kernel must move with its own change.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from kperf.history.asvrun import asv_env, run_asv
from kperf.machine import write_machine_file

from .conftest import REPO

pytestmark = pytest.mark.slow

MACHINE = "kperf-test-cpu"
TL_SHARED = "bench_gemm.GemmSharedMem.track_value"
TR_REGS = "bench_gemm.GemmRegisters.track_value"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path}: {old!r} not found; update this test with the kernel"
    path.write_text(text.replace(old, new))


@pytest.fixture(scope="module")
def two_commits(tmp_path_factory) -> tuple[Path, str, str, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("asv-commits")
    repo = tmp / "repo"
    subprocess.run(["git", "clone", "-q", str(REPO), str(repo)], check=True)
    _git(repo, "checkout", "-q", "-B", "main")  # asv follows main, whatever branch was cloned
    _git(repo, "config", "user.email", "test@kperf")
    _git(repo, "config", "user.name", "kperf test")
    first = _git(repo, "rev-parse", "HEAD")
    _edit(repo / "kernels/gemm/tilelang_gemm.py",
          '"gfx942": Config(block_M=128, block_N=128, block_K=32,',
          '"gfx942": Config(block_M=128, block_N=128, block_K=64,')
    _edit(repo / "kernels/gemm/triton_gemm.py",
          '"gfx942": Config(BM=256, BN=256, BK=64, GROUP_M=4, num_warps=8',
          '"gfx942": Config(BM=128, BN=128, BK=64, GROUP_M=4, num_warps=8')
    _git(repo, "commit", "-qam", "gemm: larger K tile (TileLang), smaller tile (Triton) on gfx942")
    second = _git(repo, "rev-parse", "HEAD")
    home = tmp / "home"
    home.mkdir()
    write_machine_file({"machine": MACHINE, "arch": "x86_64", "gpu": "none"},
                       home / ".asv-machine.json")
    env = asv_env(MACHINE, repo=repo, cpu_only=True) | {"HOME": str(home)}
    hashes = tmp / "hashes.txt"
    hashes.write_text(f"{first}\n{second}\n")
    rc = run_asv(["run", "--machine", MACHINE, "--show-stderr", f"HASHFILE:{hashes}",
                  "-b", r"GemmSharedMem\.track_value\('gfx942', 'fp16', 'tilelang'\)",
                  "-b", r"GemmRegisters\.track_value\('gfx942', 'fp16', 'triton'\)"],
                 env, repo=repo).returncode
    assert rc == 0, "asv run failed; its output is above"
    return repo, first, second, env


def _result(repo: Path, commit: str, benchmark: str, params: tuple[str, ...]) -> float:
    files = list((repo / ".asv" / "results" / MACHINE).glob(f"{commit[:8]}-*.json"))
    assert len(files) == 1, files
    data = json.loads(files[0].read_text())
    row = dict(zip(data["result_columns"], data["results"][benchmark], strict=False))
    import itertools

    combos = list(itertools.product(*row["params"]))
    return row["result"][combos.index(tuple(repr(p) for p in params))]


def test_each_commit_is_measured_with_its_own_kernels(two_commits):
    repo, first, second, _ = two_commits
    lds_1 = _result(repo, first, TL_SHARED, ("gfx942", "fp16", "tilelang"))
    lds_2 = _result(repo, second, TL_SHARED, ("gfx942", "fp16", "tilelang"))
    # A and B tiles of 128 x block_K fp16 each: doubling block_K doubles the LDS
    assert lds_1 == 2 * 128 * 32 * 2 and lds_2 == 2 * lds_1
    regs_1 = _result(repo, first, TR_REGS, ("gfx942", "fp16", "triton"))
    regs_2 = _result(repo, second, TR_REGS, ("gfx942", "fp16", "triton"))
    # a 128x128 accumulator over 8 waves needs fewer VGPRs than a 256x256 one
    assert regs_2 < regs_1


def test_publish_shows_both_commits(two_commits):
    repo, first, second, env = two_commits
    assert run_asv(["publish"], env, repo=repo).returncode == 0
    index = json.loads((repo / "html" / "index.json").read_text())
    assert {first, second} <= set(index["revision_to_hash"].values())
    graph = next((repo / "html" / "graphs").rglob("bench_gemm.GemmSharedMem.track_value.json"))
    points = json.loads(graph.read_text())
    assert len(points) == 2 and points[0][1] != points[1][1]
    assert os.path.exists(repo / "html" / "index.html")
