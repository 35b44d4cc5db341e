"""The typed structures that cross processes (kperf/specs.py, kperf/core/record.py) and the
JSON schemas that check them where they are read name the same fields, and what the code
writes passes its schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kperf.config import ConfigError, validate
from kperf.core import record
from kperf.specs import CaseSpec, GateCase
from kperf.suites.timed import gate_cases

from .conftest import REPO

SCHEMAS = REPO / "kperf" / "schemas"


def test_a_gate_case_and_its_spec_are_the_schemas_case_and_spec() -> None:
    """``GateCase`` and ``CaseSpec`` against gate-state.json's ``case`` and ``spec``; every
    case this repository's benchmarks give the gate passes as a gate-state's case."""
    defs = json.loads((SCHEMAS / "gate-state.json").read_text())["$defs"]
    assert set(GateCase.__annotations__) == set(defs["case"]["properties"])
    assert set(CaseSpec.__annotations__) == set(defs["spec"]["properties"])
    cases = gate_cases(REPO)
    assert {c["kind"] for c in cases} == {"time", "static", "compile"}
    state = {"schema": "kperf-gate-state-2", "base": "a" * 40, "head": "b" * 40,
             "base_how": "given", "machine": "m", "cases": cases,
             "lanes": [{"label": "gpu0", "cases": [c["name"] for c in cases]}]}
    validate(state, "gate-state", "the repository's gate cases")
    bad = {**state, "cases": [{**cases[0], "spec": {"case": "no op"}}]}
    with pytest.raises(ConfigError, match="/cases/0/spec"):
        validate(bad, "gate-state", "a case without its op")


def test_the_record_type_and_its_schema_name_the_same_fields(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """``record.Record`` and kperf/schemas/record.json describe one record: the same fields,
    and a record as the timed suite writes it passes the schema, one with a wrong type not."""
    schema = json.loads((SCHEMAS / "record.json").read_text())
    assert set(record.Record.__annotations__) == set(schema["properties"])
    monkeypatch.setenv("KPERF_MACHINE", "m1")
    path = record.write_record("bench_gemm.GemmTime.track_time", {"case": "c"}, {
        "kind": "time", "recorded_at": 1.0, "plan": {}, "measurement": {"samples": [1e-3]},
        "config": {"BLOCK_M": 128}, "target": "sm_90a", "gpu": "NVIDIA H100", "tflops": None,
        "pid": 7}, tmp_path)
    written = json.loads(path.read_text())
    validate(written, "record", str(path))
    with pytest.raises(ConfigError, match="/pid"):
        validate({**written, "pid": "7"}, "record", str(path))
