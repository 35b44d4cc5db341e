"""What the gate reads before it measures: thresholds.json's checks (each error names the
file and the field), hex-only bit masks, each op's Time suite in its op's class, and the
op code digest that decides which ops are measured at all."""

from __future__ import annotations

import importlib
import inspect
import json
from pathlib import Path

import pytest

from kperf.config import ConfigError
from kperf.gate.config import Thresholds, parse_bits
from kperf.project import DEFAULTS

REPO = Path(__file__).resolve().parent.parent


def test_thresholds_errors_name_the_file_and_field(tmp_path: Path) -> None:
    raw = json.loads((DEFAULTS / "thresholds.json").read_text())
    path = tmp_path / "t.json"
    for mutate, where in (
            (lambda r: r.__setitem__("alpha", None), "/alpha"),
            (lambda r: r["classes"]["compute"].__setitem__("min_ratio", -1), "/classes/compute"),
            (lambda r: r["sequential"].__setitem__("min_rounds", -3), "/sequential/min_rounds"),
            (lambda r: r["throttle_bits"]["environment"].__setitem__("nvml", "10"),
             "/throttle_bits/environment/nvml"),
            (lambda r: r["rules"][1].__setitem__("match", "("), "/rules/1/match"),
            (lambda r: r["rules"][1].__setitem__("class", "warp-bound"), "/rules/1/class"),
            (lambda r: r["sequential"].__setitem__("max_rounds", 2), "/sequential/max_rounds"),
            (lambda r: r.__setitem__("at_cap_class", "static"), "/at_cap_class"),
            (lambda r: r.__setitem__("at_cap_class", "warp-bound"), "/at_cap_class"),
            (lambda r: r["classes"]["bandwidth"].__setitem__("placement_arena_gb", 0),
             "/classes/bandwidth/placed_outputs"),
            (lambda r: r["classes"]["bandwidth"].__setitem__("rep_hold_min_s", -1e-6),
             "/classes/bandwidth/rep_hold_min_s"),
            (lambda r: r["classes"]["bandwidth"].__setitem__("rep_hold_min_s", 0.0021),
             "/classes/bandwidth/rep_hold_min_s")):
        broken = json.loads(json.dumps(raw))
        mutate(broken)
        path.write_text(json.dumps(broken))
        with pytest.raises(ConfigError) as err:
            Thresholds.load(path)
        assert str(path) in str(err.value) and where in str(err.value), err.value
    path.write_text(json.dumps(raw).replace('"alpha": 0.01', '"alpha": NaN'))
    with pytest.raises(ConfigError, match=r"alpha|NaN"):
        Thresholds.load(path)


def test_bit_masks_are_hex_only() -> None:
    assert parse_bits("0x10") == 16
    with pytest.raises(ValueError, match="hexadecimal"):
        parse_bits("10")


def test_every_ops_time_suite_gets_its_ops_bound_class(th) -> None:
    from kperf.ops.registry import get_op, op_names

    checked = 0
    for name in op_names():
        op = get_op(name)
        module = importlib.import_module(f"benchmarks.bench_{name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if getattr(cls, "op", None) != name or not hasattr(cls, "track_time"):
                continue
            for case_name in cls.params[0]:
                full = f"bench_{name}.{cls.__name__}.track_time({case_name!r}, 'fp16', 'triton')"
                _, klass = th.rule_for(full)
                assert klass.name == ("decode" if "decode" in case_name else op.klass), full
                checked += 1
    assert checked > 0


def test_an_ops_code_digest_covers_its_folder_and_the_shared_code_only(tmp_path: Path) -> None:
    from kperf.gate.plan import code_digest

    def side(name: str, gemm: str = "g", softmax: str = "s", shared: str = "op",
             record: str = "r") -> Path:
        site = tmp_path / name
        for rel, text in (("kernels/__init__.py", ""), ("kernels/shared.py", shared),
                          ("kernels/gemm/triton_gemm.py", gemm),
                          ("kernels/softmax/triton_softmax.py", softmax),
                          ("kernels-0.1.0.dist-info/RECORD", record),
                          ("kernels/gemm/__pycache__/triton_gemm.cpython-312.pyc", record)):
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            (site / rel).write_text(text)
        return site

    ops = ["gemm", "softmax"]
    base = code_digest(side("base"), "gemm", ops)
    assert code_digest(side("softmax-edit", softmax="s2", record="r2"), "gemm", ops) == base
    assert code_digest(side("gemm-edit", gemm="g2"), "gemm", ops) != base
    assert code_digest(side("shared-edit", shared="op2"), "gemm", ops) != base
    # an op the plan does not know of is not left out: its folder counts as shared code
    assert code_digest(side("softmax-edit2", softmax="s3"), "gemm", ["gemm"]) != base
