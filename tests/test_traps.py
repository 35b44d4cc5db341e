"""No silent traps (issue 50): what the main job says of a working tree it will not
measure, a ``-b`` on a machine without a GPU, and an op that declares no class."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

from kperf import project
from kperf.history.bench import selection, working_tree_notes
from tests._git import commit, git
from tests.team_fixture import OP_INIT, REFERENCE, SPEC, TRITON, kperf

NAMES = {"compile": "bench_rope.RopeCompile.track_compile('gfx942', 'fp16', 'triton')",
         "static": "bench_rope.RopeRegisters.track_value('sm_90a', 'fp16', 'tilelang')",
         "time": "bench_rope.RopeTime.track_time('llama3-8b.mlp', 'fp16', 'triton')",
         "energy": "bench_rope.RopeEnergy.track_energy('llama3-8b.mlp', 'fp16', 'triton')",
         "other": "bench_gemm.GemmCompile.track_compile('gfx942', 'fp16', 'triton')"}


def test_a_b_without_a_gpu_keeps_its_cpu_side_cases_and_says_what_it_left(capsys) -> None:
    (regex,) = selection(["Rope"], gpu=False)
    picked = {kind for kind, name in NAMES.items() if re.search(regex, name)}
    assert picked == {"compile", "static"}
    out = capsys.readouterr().out
    assert "-b Rope runs only its CPU-side cases" in out and "<Op>Time, <Op>Energy" in out
    assert selection(["Rope"], gpu=True) == ["Rope"]


def _project(root: Path) -> project.Project:
    package = root / "team_ops"
    (package / "scale").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name, text in (("__init__.py", OP_INIT), ("spec.py", SPEC), ("reference.py", REFERENCE),
                       ("triton_scale.py", TRITON)):
        (package / "scale" / name).write_text(text)
    (root / "benchmarks").mkdir()
    (root / "benchmarks" / "__init__.py").write_text("")
    (root / "kperf.toml").write_text('[kperf]\nops = "team_ops"\n')
    git(root, "init", "-q", "-b", "main")
    commit(root, "c1")
    return project.load(root)


def test_the_main_job_says_what_of_the_working_tree_it_will_not_measure(tmp_path: Path
                                                                        ) -> None:
    proj = _project(tmp_path)
    head = git(tmp_path, "rev-parse", "HEAD")
    assert working_tree_notes(proj, head) == []
    triton = tmp_path / "team_ops" / "scale" / "triton_scale.py"
    triton.write_text(triton.read_text().replace("NUM_WARPS = 4", "NUM_WARPS = 8"))
    (tmp_path / "team_ops" / "rope").mkdir()
    (tmp_path / "team_ops" / "rope" / "__init__.py").write_text("")
    (tmp_path / "benchmarks" / "bench_rope.py").write_text("")
    notes = " | ".join(working_tree_notes(proj, head))
    assert f"asv measures commit {head[:8]} without them" in notes
    assert "team_ops/scale/triton_scale.py" in notes
    assert "op(s) rope exist only in the working tree" in notes
    assert "benchmarks/bench_rope.py are used" in notes


def test_an_op_without_a_class_is_refused_by_name(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from kperf.config import ConfigError
    from kperf.gate.config import Thresholds

    proj = _project(tmp_path)
    init = proj.ops_dir / "scale" / "__init__.py"
    init.write_text(init.read_text().replace('"bandwidth", ', '"", '))
    checked = kperf(tmp_path, "check")
    assert checked.returncode == 1 and "scale: declares no class" in checked.stderr
    th = Thresholds.load(project.DEFAULTS / "thresholds.json")
    monkeypatch.setenv(project.PROJECT_ENV, str(tmp_path))
    with pytest.raises(ConfigError, match="op 'scale' declares no class"):
        th.rule_for("bench_scale.ScaleTime.track_time('hidden-16m', 'fp16', 'triton')")


def test_a_project_a_test_loads_is_not_importable_after_it(tmp_path: Path) -> None:
    """A project loaded in the test process puts its root first on ``sys.path``; the next
    test must not import its packages (tests/conftest.py ``restored_imports``, every test's):
    an earlier test's empty ``benchmarks`` hid the repository's from 32 tests."""
    from tests.conftest import restored_imports

    with restored_imports(tmp_path):
        _project(tmp_path).use_working_tree()
        assert sys.path[0] == str(tmp_path)
        assert importlib.import_module("team_ops").__file__.startswith(str(tmp_path))
    assert str(tmp_path) not in sys.path and "team_ops" not in sys.modules
