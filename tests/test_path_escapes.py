"""Names read from files or machines never build a path outside their root, and no tool
deletes a folder that is not its own scratch (docs/reliability.md, issue 14 finding 5)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kperf import machine as machine_tool
from kperf.history import bisect
from kperf.paths import PathError, kept_paths, remove_scratch
from kperf.stacks import matrix, stackcmp

from .conftest import synthetic_project

ESCAPE = "../../x"


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# ----------------------------------------------------------------- machines


def test_machine_name_from_the_command_line_or_the_host_is_one_plain_name(
        tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(machine_tool, "probe_stack", lambda python=None: {})
    with pytest.raises(PathError, match=r"machine name '\.\./\.\./x' is not a plain name"):
        machine_tool.describe(ESCAPE)
    monkeypatch.setattr(machine_tool.platform, "node", lambda: "evil/../../x.example")
    assert machine_tool.describe()["machine"] == "evil-cpu"  # slugged, never a path
    path = tmp_path / "home" / ".asv-machine.json"
    with pytest.raises(PathError):
        machine_tool.write_machine_file({"machine": ESCAPE}, path)
    assert not path.exists()


def test_stack_probe_answer_is_validated(monkeypatch) -> None:
    class Out:
        returncode, stderr = 0, ""
        stdout = '{"torch": "2.6", "num_gpus": "eight"}\n'

    monkeypatch.setattr(machine_tool.subprocess, "run", lambda *a, **k: Out())
    with pytest.raises(ValueError, match=r"stack probe of .*: field /num_gpus: "):
        machine_tool.probe_stack("/usr/bin/python3")
    Out.stdout = '{"torch": "2.6", "triton'  # a child killed mid-print
    with pytest.raises(ValueError, match="truncated or corrupt"):
        machine_tool.probe_stack("/usr/bin/python3")


@pytest.mark.parametrize("text", ["{\"version\": 1, \"box\": {\"machine\": \"box\"", "",
                                  '{"version": 1, "../x": {"machine": "../x"}}'])
def test_corrupt_machine_file_is_named_and_never_overwritten(tmp_path: Path, text: str) -> None:
    path = tmp_path / ".asv-machine.json"
    path.write_text(text)
    with pytest.raises(SystemExit, match=f"{path}: .*fix or remove it"):
        machine_tool.write_machine_file({"machine": "box", "gpu": "none"}, path)
    assert path.read_text() == text


def test_full_disk_while_writing_the_machine_file(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / ".asv-machine.json"
    machine_tool.write_machine_file({"machine": "old", "gpu": "none"}, path)
    before = path.read_text()

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(machine_tool.json, "dumps", no_space)
    with pytest.raises(OSError, match="No space left"):
        machine_tool.write_machine_file({"machine": "new", "gpu": "none"}, path)
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".asv-machine.json",
                                                          ".asv-machine.json.lock"]


def _git_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    conf = {"version": 1, "project": "p", "repo": ".", "branches": ["main"],
            "results_dir": ".asv/results", "html_dir": "html", "env_dir": ".asv/env"}
    (repo / "asv.conf.json").write_text(json.dumps(conf))
    synthetic_project(repo)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@e")
    for cmd in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "c"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, env=env)
    for kept in (".asv/results/m/r.json", ".asv/records/m/c-e/b/r.json", "html/index.json"):
        (repo / kept).parent.mkdir(parents=True, exist_ok=True)
        (repo / kept).write_text("{}")
    return repo


@pytest.mark.parametrize("html", [".asv/records", ".asv/records/m", ".asv", ".asv/results",
                                  ".asv/gate-reports", ".asv/env", ".", "..", "notes"])
def test_publish_never_puts_the_site_over_what_it_keeps(tmp_path: Path, html: str,
                                                        monkeypatch, capsys) -> None:
    """``kperf.site.publish --html .asv/records`` swapped the new site in and deleted every
    record with the old "site": refused before anything is written or deleted, as is a
    folder that exists and holds no site (``notes``)."""
    from kperf.site import publish

    repo = _git_repo(tmp_path)
    (repo / ".asv" / "env" / "py").mkdir(parents=True)
    (repo / "notes").mkdir()
    (repo / "notes" / "mine.txt").write_text("not a site")
    before = _tree(tmp_path)
    monkeypatch.setenv("KPERF_PROJECT", str(repo))
    code = publish.main(["--html", str(repo / html)])
    err = capsys.readouterr().err
    assert code == 2 and "--html" in err and "nothing was written or deleted" in err, err
    assert _tree(tmp_path) == before, "a kept folder was touched"


@pytest.mark.parametrize("name", ["..", ".", "../x", "/tmp/x", "a/b", ".hidden"])
def test_a_kept_gate_report_is_named_by_one_plain_name(tmp_path: Path, name: str,
                                                       monkeypatch, capsys) -> None:
    """``--keep-gate DIR --name ..`` wrote the report into .asv/ itself."""
    from kperf.site import publish

    repo = _git_repo(tmp_path)
    src = tmp_path / "out"
    src.mkdir()
    (src / "gate.json").write_text(json.dumps({"schema": "kperf-gate-2", "cases": []}))
    before = _tree(tmp_path)
    monkeypatch.setenv("KPERF_PROJECT", str(repo))
    code = publish.main(["--keep-gate", str(src), "--name", name])
    err = capsys.readouterr().err
    assert code == 2 and "--name" in err and "not a plain name" in err, err
    assert _tree(tmp_path) == before


def test_foreign_pr_dir_is_not_deleted(tmp_path: Path) -> None:
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("years of work")
    repo = _git_repo(tmp_path)
    keep = kept_paths(repo, {"results_dir": ".asv/results"})
    with pytest.raises(PathError, match="was not made by this tool"):
        remove_scratch(foreign, keep, "--pr-dir", own_files=("gate-state.json",))
    assert (foreign / "thesis.tex").exists()


# ----------------------------------------------------------------- matrix, bisect, stackcmp


def test_site_probe_cannot_inject_a_pth_line(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    answer = json.dumps({"dirs": ["/usr/lib/python3/dist-packages", "/x\nimport os"],
                         "python": "3.12"})
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' '{answer}'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(matrix.MatrixError, match=r"field /dirs/1: "):
        matrix.probe_sites(str(fake))


def test_image_machine_name_stays_inside(tmp_path: Path) -> None:
    with pytest.raises(PathError):
        matrix.image_config({"results_dir": ".asv/results"}, tmp_path, ESCAPE, "3.12")


def test_bisect_refuses_records_as_its_results_and_an_escaping_machine(
        tmp_path: Path, monkeypatch, capsys) -> None:
    repo = _git_repo(tmp_path)
    before = _tree(repo)
    args = ["HEAD", "HEAD", "b.T.track_time", "--repo", str(repo)]
    assert bisect.main([*args, "--results-dir", str(repo / ".asv" / "records")]) == 2
    assert "overlaps the per-sample records" in capsys.readouterr().err
    home = tmp_path / "home"
    home.mkdir()
    (home / ".asv-machine.json").write_text(json.dumps({"version": 1,
                                                        ESCAPE: {"machine": ESCAPE}}))
    monkeypatch.setenv("HOME", str(home))
    assert bisect.main([*args, "--machine", ESCAPE]) == 2
    assert "is not a plain name" in capsys.readouterr().err
    assert _tree(repo) == before


def test_stackcmp_records_folder_cannot_lead_outside(tmp_path: Path) -> None:
    results_file = tmp_path / "round" / "results" / "m" / "aaaaaaaa-env.json"
    results_file.parent.mkdir(parents=True)
    results_file.write_text(json.dumps({
        "version": 2, "commit_hash": "a" * 40, "env_name": "env",
        "result_columns": ["result", "params", "samples"],
        "results": {"b.T.track_time": [[1e-3], [["'p'"]], [[1e-3, 1e-3]]]}}))
    records = tmp_path / "records"
    records.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (records / "m").symlink_to(tmp_path / "elsewhere")
    chosen = stackcmp.StackFile(results_file, "m", "env", {})
    with pytest.raises(PathError, match="leads outside"):
        stackcmp.read_stack(chosen, records, "a" * 40, {})


def test_path_errors_are_bad_input_for_the_command_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "kperf.machine", "--name", ESCAPE,
                           "--write"],
                          cwd=Path(__file__).resolve().parent.parent, capture_output=True,
                          text=True, env=dict(os.environ, HOME=str(tmp_path)), timeout=300)
    assert proc.returncode != 0 and "not a plain name" in proc.stderr
    assert not (tmp_path / ".asv-machine.json").exists()
