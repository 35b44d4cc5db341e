"""kperf.history.perf's case planning: default cases, baselines first, configuration variants."""

from __future__ import annotations

import argparse

import pytest

from kperf.history import perf


def _args(**kw) -> argparse.Namespace:
    base = dict(ops="softmax", cases="llama3-8b.logits-4k", per_op=1, dtypes="fp16",
                backends=None, plan='{"trials": 3}', variants=None)
    return argparse.Namespace(**{**base, **kw})


def test_variants_add_configurations_after_each_default():
    variants = '{"triton": [{"programs_per_sm": 1}, {"programs_per_sm": 2, "BLOCK_N": 8192}]}'
    specs = perf.plan_specs(_args(variants=variants))
    assert [s["backend"] for s in specs] == ["torch", "torch", "tilelang", "triton", "triton",
                                             "triton"]
    assert specs[0]["op"] == "hbm-copy"
    tuned = [s for s in specs if s.get("overrides")]
    assert [s["overrides"] for s in tuned] == [{"programs_per_sm": 1},
                                               {"programs_per_sm": 2, "BLOCK_N": 8192}]
    assert all(s["plan"] == {"trials": 3} for s in specs)
    assert perf.label(tuned[1]) == "triton {programs_per_sm=2, BLOCK_N=8192}"
    assert perf.label(specs[2]) == "tilelang"


def test_variant_rows_take_the_default_baseline():
    rows = [{"op": "softmax", "case": "c", "dtype": "fp16", "backend": b, "status": "ok",
             "median_s": t, "gbps": 1000.0, **({"overrides": o} if o else {})}
            for b, t, o in (("torch", 2.0, None), ("triton", 1.0, None),
                            ("triton", 4.0, {"programs_per_sm": 1}))]
    perf.attach_baselines(rows)
    assert [r["vs_baseline"] for r in rows] == [1.0, 2.0, 0.5]


@pytest.mark.parametrize("text", ["[1, 2]", '{"triton": {"a": 1}}', "{not json"])
def test_bad_variants_name_the_option(text):
    with pytest.raises(SystemExit, match="--variants"):
        perf.parse_variants(text)


def test_a_perf_run_leaves_no_compile_cache_behind(tmp_path, monkeypatch) -> None:
    """Issue 51: the cold compile caches a head-to-head run points Triton and TileLang at, and
    its worker folder, are its own and removed when it ends, its cases failed or not."""
    seen: list[str] = []

    def failed(client, spec, timeout_s):
        seen.append(perf.os.environ["TRITON_CACHE_DIR"])
        return "failed", None, "measurement worker died while answering"

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("KPERF_WORKER_DIR", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    for name in ("TRITON_CACHE_DIR", "TILELANG_CACHE_DIR", "TRITON_DEFAULT_FP_FUSION"):
        monkeypatch.setenv(name, "as before")  # main sets them: put back after the test
    monkeypatch.setattr(perf.tempfile, "tempdir", None)
    monkeypatch.setattr(perf, "measure", failed)
    out = tmp_path / "out" / "perf.json"
    out.parent.mkdir()
    assert perf.main(["--ops", "softmax", "--per-op", "1", "--dtypes", "fp16",
                      "--out", str(out)]) == 1
    assert seen and seen[0].startswith(str(tmp_path / "kperf-perf-cache-"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert '"failed"' in out.read_text()
