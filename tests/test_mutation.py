"""The mutation runner (tools/mutation/run.py) and its list (tools/mutation/mutants.py):
every mutant still applies to the code as it is, and the runner tells a killed mutant
from a survivor in a copy of the tree, never touching the working tree itself."""

from __future__ import annotations

from pathlib import Path

from tools.mutation import run as mutation
from tools.mutation.mutants import MUTANTS, Mutant

REPO = Path(__file__).resolve().parent.parent
PRECEDENCE = "tests/test_gate_verdicts.py::test_exit_code_precedence"


def test_every_mutant_applies_once_and_names_tests_that_exist() -> None:
    assert len(MUTANTS) >= 40
    assert mutation.stale(REPO, MUTANTS) == [], "a snippet moved: update tools/mutation/mutants.py"
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)
    for m in MUTANTS:
        assert m.original != m.mutated, m.name
        for test in m.tests:
            assert (REPO / test.split("::")[0]).is_file(), (m.name, test)


def test_the_runner_tells_killed_from_survived_in_a_copy() -> None:
    before = (REPO / "kperf/gate/sequential.py").read_text()
    files = mutation.tree_files(REPO)
    real = Mutant("regression-passes", "kperf/gate/sequential.py",
                  "        return EXIT_REGRESSION\n", "        return EXIT_PASS\n",
                  (PRECEDENCE,), "a SLOW case passes")
    same = Mutant("no-change", "kperf/gate/sequential.py", "        return EXIT_REGRESSION\n",
                  "        return EXIT_REGRESSION  # same code\n", (PRECEDENCE,), "nothing")
    killed = mutation.run_mutant(REPO, files, real, 120)
    survived = mutation.run_mutant(REPO, files, same, 120)
    assert (killed.result, survived.result) == ("killed", "survived"), (killed, survived)
    assert PRECEDENCE in killed.detail
    assert (REPO / "kperf/gate/sequential.py").read_text() == before
    assert "| regression-passes | `kperf/gate/sequential.py` |" in mutation.table([killed])
