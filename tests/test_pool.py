"""kperf.core.pool: a handler run over requests in fresh processes (a cold op's compiles)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from kperf.core.pool import run_many

HANDLER = textwrap.dedent('''
    import os, sys, time
    import toysuite  # the preloaded package, importable by its name only

    def handle(request):
        if request.get("fail"):
            raise ValueError(f"case {request['n']} does not compile")
        if request.get("hang"):
            time.sleep(60)
        if request.get("crash"):
            os._exit(3)  # a compiler that takes its process down
        return {"n": request["n"], "pid": os.getpid(), "marker": toysuite.MARKER,
                "on_path": "/nowhere/else" in sys.path}
''')


def _suite(tmp_path: Path) -> tuple[str, str]:
    package = tmp_path / "toysuite"
    package.mkdir()
    (package / "__init__.py").write_text("MARKER = 'registered'\n")
    handler = tmp_path / "handler.py"
    handler.write_text(HANDLER)
    return f"{handler}:handle", str(package / "__init__.py")


def test_requests_are_answered_in_order_by_parallel_processes(tmp_path: Path) -> None:
    handler, preload = _suite(tmp_path)
    requests = [{"n": n} for n in range(5)] + [{"n": 5, "fail": True}]
    answers = run_many(handler, requests, 3, [*sys.path, "/nowhere/else"], preload, 120)
    assert [a["ok"] for a in answers] == [True] * 5 + [False]
    assert [a["result"]["n"] for a in answers[:5]] == list(range(5))
    assert len({a["result"]["pid"] for a in answers[:5]}) == 3  # three processes shared them
    assert all(a["result"]["marker"] == "registered" and a["result"]["on_path"]
               for a in answers[:5])
    assert answers[5]["error"] == "ValueError: case 5 does not compile"


def test_a_hung_process_is_killed_and_only_its_unanswered_requests_fail(tmp_path: Path) -> None:
    handler, preload = _suite(tmp_path)
    requests = [{"n": 0}, {"n": 1}, {"n": 2, "hang": True}, {"n": 3}]
    answers = run_many(handler, requests, 2, sys.path, preload, timeout_s=5)
    # process 0 took requests 0 and 2 (answered 0, hung on 2); process 1 took 1 and 3
    assert [a["ok"] for a in answers] == [True, True, False, True]
    assert "ran past 5 s and was killed" in answers[2]["error"]


def test_a_crashed_process_fails_only_the_requests_it_had_left(tmp_path: Path) -> None:
    handler, preload = _suite(tmp_path)
    requests = [{"n": 0}, {"n": 1}, {"n": 2, "crash": True}, {"n": 3}, {"n": 4}, {"n": 5}]
    answers = run_many(handler, requests, 2, sys.path, preload, 60)
    # process 0 took 0, 2, 4: answered 0, died on 2; process 1 answered 1, 3 and 5
    assert [a["ok"] for a in answers] == [True, True, False, True, False, True]
    assert answers[2]["error"].startswith("the process exited with 3 before answering")
