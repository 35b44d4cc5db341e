"""The site's pages without a browser (kperf/site/, kperf/site/telemetry_pages.py): units, the
head-to-head figures and their reasons, steps explained from the records either side,
and everything generated escaped."""

from __future__ import annotations

from pathlib import Path

import pytest

from kperf.project import DEFAULTS
from kperf.site import (
    data,
    gatepages,
    headtohead,
    pages,
    telemetry_pages,
)

from ._site import HOSTILE, _files, _record

# ----------------------------------------------------------------- figures and pages


def test_units_fit_kernels() -> None:
    assert [pages.fmt_time(x) for x in (2.3e-4, 1.5, 0.0123, 4.2e-8)] == [
        "230 µs", "1.50 s", "12.3 ms", "42.0 ns"]
    assert pages.fmt_energy(0.128) == "128 mJ" and pages.fmt_time(None) == "—"


def test_head_to_head_figures_and_reasons() -> None:
    commit = "c" * 40
    rf = _files({"tilelang": 2.0e-4, "triton": None, "torch": 1.0e-4}, commit)
    recs = []
    for backend, tflops, gbps, schema in (("tilelang", 500.0, 2.0, "kperf-record-1"),
                                          ("torch", 1000.0, 10.0, "kperf-record-2")):
        r = _record(commit, schema, tflops=tflops, gbps=gbps)
        r["params"]["backend"] = backend
        r["_schema_version"] = data.RECORD_SCHEMAS[schema]
        recs.append(r)
    views = headtohead.build({"m1": {"gpu": "G"}}, [rf], {}, recs)
    (table,) = views[0].tables
    (case, dtype, cells) = table.rows[0]
    tl, tr, torch = cells
    assert (case, dtype) == ("square-4096", "fp16")
    assert tl.time_s == 2.0e-4 and tl.vs_torch == pytest.approx(0.5)
    assert tl.roof_frac == pytest.approx(0.5) and tl.roof_kind == "compute"
    assert tl.energy_j is None and "before schema 2" in tl.energy_why
    assert torch.energy_j == 0.06 and torch.roof_frac == pytest.approx(1.0)
    assert tr.status == "failed" and "asv keeps no error text" in tr.reason
    assert views[0].compute_roofs["fp16"].value == 1000.0
    assert "best GB/s any kernel" in views[0].bandwidth_roof.source
    html = headtohead.render(views, data.Notes(), "https://h/commit/", {})
    assert 'data-v="0.0002"' in html and "200 µs" in html and "0.50×" in html
    cpu = headtohead.build({"cpu": {"gpu": "none"}}, [], {}, [])
    assert "has no GPU" in cpu[0].why_empty


def test_head_to_head_marks_a_backend_timed_behind_a_hold_where_another_was_not() -> None:
    """The decode16 Triton GEMM's host falls behind the GPU, so its reps wait behind a hold
    (165 us in the H200 histories of 2026-12-03, vm-nvidia-h200-c17ca2d7 and others) while
    TileLang's are not held: its time is marked, and flagged as from another regime than
    TileLang's; torch's records of before ``rep_hold_s`` leave torch unmarked and out of
    the comparison."""
    commit = "c" * 40
    rf = _files({"tilelang": 1.0e-4, "triton": 8.1e-5, "torch": 9.0e-5}, commit)
    recs = []
    for backend, hold_s in (("tilelang", 0.0), ("triton", 165e-6), ("torch", None)):
        r = _record(commit)
        r["params"]["backend"] = backend
        if hold_s is not None:
            r["measurement"]["rep_hold_s"] = hold_s
        r["_schema_version"] = 2
        recs.append(r)
    views = headtohead.build({"m1": {"gpu": "G"}}, [rf], {}, recs)
    tl, tr, torch = views[0].tables[0].rows[0][2]
    assert (tl.rep_hold_s, tr.rep_hold_s, torch.rep_hold_s) == (0.0, 165e-6, None)
    assert tl.regimes_differ and tr.regimes_differ and not torch.regimes_differ
    html = headtohead.render(views, data.Notes(), "https://h/commit/", {})
    assert html.count('held" title=') == 1 and "behind a 165 µs hold" in html
    assert "not from one regime" in html
    recs[0]["measurement"]["rep_hold_s"] = 150e-6  # both held: one regime, still marked
    views = headtohead.build({"m1": {"gpu": "G"}}, [rf], {}, recs)
    html = headtohead.render(views, data.Notes(), "https://h/commit/", {})
    assert html.count('held" title=') == 2 and "not from one regime" not in html


def test_head_to_head_takes_an_unchanged_baseline_from_the_commit_that_timed_it() -> None:
    """``--baseline changed`` leaves torch untimed (a skip) at a commit where nothing its
    timing depends on changed: the page takes its latest timed point and says where from."""
    older, newer = "a" * 40, "b" * 40
    files = [_files({"tilelang": 2.0e-4, "triton": 3.0e-4, "torch": 1.0e-4}, older),
             _files({"tilelang": 2.5e-4, "triton": 3.0e-4, "torch": float("nan")}, newer)]
    recs = [_record(older, backend="x") | {"params": {"case": "square-4096", "dtype": "fp16",
                                                      "backend": "torch"}}]
    views = headtohead.build({"m1": {"gpu": "G"}}, files, {}, recs,
                             revisions={older: 1, newer: 2})
    (table,) = views[0].tables
    tl, _, torch = table.rows[0][2]
    assert table.commit == newer and tl.time_s == 2.5e-4
    assert torch.status == "ok" and torch.time_s == 1.0e-4 and torch.timed_at == older
    assert torch.n_records == 1  # the records of the commit that timed it
    assert tl.vs_torch == pytest.approx(0.4) and "timed at aaaaaaaa" in tl.vs_torch_why
    html = headtohead.render(views, data.Notes(), "https://h/commit/", {})
    assert "@aaaaaaaa" in html and "0.40×*" in html
    # timed at the latest commit: that point, no note
    files[1] = _files({"tilelang": 2.5e-4, "triton": 3.0e-4, "torch": 1.2e-4}, newer)
    views = headtohead.build({"m1": {"gpu": "G"}}, files, {}, recs,
                             revisions={older: 1, newer: 2})
    tl, _, torch = views[0].tables[0].rows[0][2]
    assert torch.time_s == 1.2e-4 and not torch.timed_at and not tl.vs_torch_why


def test_head_to_head_takes_a_kernel_timed_under_kernels_changed_from_where_it_was_timed(
        ) -> None:
    """``--kernels changed`` skips a TileLang or Triton case where it is unchanged (an
    edit of gemm's TileLang kernel times TileLang only): a skipped case whose latest timed
    record carries a ``kernel_key`` is taken from that commit; one timed under the default
    policy and skipped later stays a skip (the commit may no longer have it)."""
    older, newer = "a" * 40, "b" * 40
    files = [_files({"tilelang": 2.0e-4, "triton": 3.0e-4, "torch": 1.0e-4}, older),
             _files({"tilelang": 2.5e-4, "triton": float("nan"), "torch": float("nan")},
                    newer)]

    def rec(backend: str, **extra) -> dict:
        return _record(older, **extra) | {"params": {"case": "square-4096", "dtype": "fp16",
                                                     "backend": backend}}

    recs = [rec("triton", kernel_key="k" * 20), rec("torch")]
    views = headtohead.build({"m1": {"gpu": "G"}}, files, {}, recs,
                             revisions={older: 1, newer: 2})
    (table,) = views[0].tables
    tl, tr, torch = table.rows[0][2]
    assert table.commit == newer and tl.time_s == 2.5e-4 and not tl.timed_at
    assert (tr.status, tr.time_s, tr.timed_at, tr.n_records) == ("ok", 3.0e-4, older, 1)
    assert torch.timed_at == older and tr.vs_torch == pytest.approx(1 / 3)
    html = headtohead.render(views, data.Notes(), "https://h/commit/", {})
    assert html.count("@aaaaaaaa") == 2
    recs[0].pop("kernel_key")  # timed under --kernels every: a skip stays a skip
    views = headtohead.build({"m1": {"gpu": "G"}}, files, {}, recs,
                             revisions={older: 1, newer: 2})
    tr = views[0].tables[0].rows[0][2][1]
    assert tr.status == "skipped" and not tr.timed_at


def test_head_to_head_keeps_a_case_whose_kernels_were_all_unchanged() -> None:
    """Under ``--kernels changed`` a commit can time one case of an op (one that failed
    before has no timing to stand for it) and skip another whole: that case's row is the
    commit's too, from where it was timed, not a case the run left out."""
    older, newer = "a" * 40, "b" * 40
    nan = float("nan")

    def two_cases(commit: str, values: list[float]) -> data.ResultFile:
        row = {"result": values, "params": [["'square-4096'", "'square-8192'"], ["'fp16'"],
                                            ["'tilelang'", "'triton'", "'torch'"]]}
        return data.ResultFile(machine="m1", commit=commit, env_name="env", date=1, label="x",
                               results={"bench_gemm.GemmTime.track_time": row})

    files = [two_cases(older, [None, 3.0e-4, 1.0e-4, 8.0e-4, 9.0e-4, 4.0e-4]),
             two_cases(newer, [2.0e-4, nan, nan, nan, nan, nan])]
    recs = [_record(older, kernel_key="k" * 20) | {"params": {
        "case": case, "dtype": "fp16", "backend": backend}}
        for case in ("square-4096", "square-8192") for backend in ("tilelang", "triton")]
    views = headtohead.build({"m1": {"gpu": "G"}}, files, {}, recs,
                             revisions={older: 1, newer: 2})
    rows = {case: cells for case, _, cells in views[0].tables[0].rows}
    assert set(rows) == {"square-4096", "square-8192"}
    assert [(c.time_s, c.timed_at) for c in rows["square-8192"][:2]] == [
        (8.0e-4, older), (9.0e-4, older)]
    assert rows["square-4096"][0].time_s == 2.0e-4 and not rows["square-4096"][0].timed_at


def test_everything_generated_is_escaped(tmp_path: Path) -> None:
    commit = "d" * 40
    rf = _files({"tilelang": 1e-4, "triton": 1e-4, "torch": 1e-4}, commit, machine=HOSTILE)
    rf.results["bench_gemm.GemmTime.track_time"]["params"][0] = [repr(HOSTILE)]
    views = headtohead.build({HOSTILE: {"gpu": HOSTILE}}, [rf], {}, [])
    notes = data.Notes([(HOSTILE, HOSTILE)])
    html = headtohead.render(views, notes, "https://h/commit/",
                                  {commit: {"subject": HOSTILE, "time": 0}})
    assert "<script>window" not in html and "<img src=x" not in html
    assert html.count("&lt;script&gt;window.__x=1&lt;/script&gt;") >= 4
    rep = {"schema": "kperf-gate-2", "status": HOSTILE, "exit_code": 1, "label": HOSTILE,
           "summary": HOSTILE, "base": "not-a-sha<b>", "head": commit, "machine": HOSTILE,
           "cases": [{"case": HOSTILE, "env": HOSTILE, "verdict": HOSTILE, "reason": HOSTILE,
                      "ratio": 1.2, "ci": [1.1, 1.3], "before": 1e-3, "after": 1.2e-3,
                      "unit": "seconds", "extra_field_of_a_later_schema": [1]}],
           "_markdown": HOSTILE, "_source": HOSTILE, "_mtime": 0.0, "_id": "r1"}
    page = gatepages.report_page(rep, "https://h/commit/")
    assert "<script>window" not in page and "<img src=x" not in page
    assert "1.20 ms" in page and "[1.1000, 1.3000]" in page
    index = gatepages.write(tmp_path, [rep], {"classes": {HOSTILE: {"doc": HOSTILE}}},
                            data.Notes(), "")
    assert "<script>window" not in index.read_text()
    rec = _record(commit)
    rec["machine"] = rec["benchmark"] = HOSTILE
    tele = telemetry_pages.write_telemetry_pages(tmp_path, records=[rec]).read_text()
    assert "<script>window" not in tele and tele.count("</script>") == 2


def test_a_telemetry_row_says_which_other_process_used_the_gpu() -> None:
    rec = _record("a" * 40)
    rec["measurement"]["gpu_processes"] = {"others": [
        {"pid": 675, "name": "python3", "trials": [0, 1]}], "note": ""}
    (row,) = telemetry_pages.rows_of([rec])
    assert row["gpu_processes_note"] == (
        "another process (pid 675, python3) used the GPU in trials 1-2") and row["gpu_shared"]
    rec["measurement"]["gpu_processes"] = {"others": None, "note": "the sysfs backend"}
    row = telemetry_pages.rows_of([rec])[0]
    assert row["gpu_processes_note"].endswith("the sysfs backend") and not row["gpu_shared"]
    rec["measurement"]["gpu_processes"] = {"others": [], "note": ""}
    row = telemetry_pages.rows_of([rec])[0]
    assert row["gpu_processes_note"] == "" and not row["gpu_shared"]


# ----------------------------------------------------------------- steps and their causes


def _step_files(values: list[float]) -> list[data.ResultFile]:
    return [_files({"tilelang": v, "triton": 1e-4, "torch": 1e-4}, c * 40)
            for c, v in zip("abc", values, strict=True)]


def _capped(commit: str, clock: float, bits: int = 0x4, energy_j: float = 0.06) -> dict:
    rec = _record(commit, energy_per_call_j=energy_j)
    rec["params"]["backend"] = "tilelang"
    for w in rec["measurement"]["windows"]:
        w.update(sm_clock_mhz_median=clock, power_w_mean=690.0, throttle_bits_or=bits)
    rec["measurement"]["windows"] = [dict(w) for w in rec["measurement"]["windows"]]
    return rec


def test_a_step_is_explained_from_the_records_either_side() -> None:
    """asv's jump (None, rev): its commit and the latest earlier commit with a value; the
    clock drop at the power limit is the code's, a thermal bit makes it the environment's,
    a commit without records leaves the cause unknown."""
    from kperf.gate.config import Thresholds
    from kperf.site import steps

    a, b, c = "a" * 40, "b" * 40, "c" * 40
    files = _step_files([2.0e-4, 2.0e-4, 2.2e-4])
    history = steps.History(files, {}, [_capped(b, 1400.0), _capped(c, 1270.0, energy_j=0.066)],
                            {a: 0, b: 1, c: 2})
    name = "bench_gemm.GemmTime.track_time('square-4096', 'fp16', 'tilelang')"
    graph = "graphs/arch-x86_64/branch-main/machine-m1/bench_gemm.GemmTime.track_time.json"
    regressions = {"regressions": [[name, graph, {}, 0, 2.2e-4, 2.0e-4,
                                    [[None, 2, 2.0e-4, 2.2e-4], [0, 2, 2.0e-4, 2.2e-4]]],
                                   ["a later asv's shape"]]}
    th = Thresholds.load(DEFAULTS / "thresholds.json")
    found = steps.find_steps(regressions, {"0": a, "1": b, "2": c}, ["m1", "m10"], history,
                             th, {r"^bench_gemm\.": 0.025})
    one, ranged = found
    assert (one.before.commit, one.after.commit) == (b, c) and one.machine == "m1"
    assert one.time_ratio == pytest.approx(1.1) and one.threshold == 0.025
    assert one.cause == "code" and one.text == ("x1.100, energy +10.0%, clock 1400 → 1270 MHz "
                                                "at the 700 W limit: the code's own")
    assert (ranged.before.commit, ranged.cause) == (a, "unknown")
    assert "no record with clock readings before the step" in ranged.why
    history = steps.History(files, {}, [_capped(b, 1400.0), _capped(c, 1270.0, 0x4 | 0x20)],
                            {a: 0, b: 1, c: 2})
    (hot, _) = steps.find_steps(regressions, {"0": a, "1": b, "2": c}, ["m1"], history, th)
    assert hot.cause == "environment" and "0x20" in hot.why and hot.threshold is None
    assert steps.machine_of(graph, ["m10", "m1"]) == "m1"


def test_a_step_between_two_timing_methods_says_so() -> None:
    """A kernel timed by graph replay before a step and by events after it (it crossed
    graph_below_s, or its estimate read the host): the line says part of the step is the
    method's. The same method on both sides, or records that do not say, add nothing."""
    from kperf.gate.config import Thresholds
    from kperf.site import steps

    a, b, c = "a" * 40, "b" * 40, "c" * 40
    name = "bench_gemm.GemmTime.track_time('square-4096', 'fp16', 'tilelang')"
    graph = "graphs/arch-x86_64/branch-main/machine-m1/bench_gemm.GemmTime.track_time.json"
    regressions = {"regressions": [[name, graph, {}, 0, 2.2e-4, 2.0e-4,
                                    [[1, 2, 2.0e-4, 2.2e-4]]]]}
    th = Thresholds.load(DEFAULTS / "thresholds.json")

    def step_of(before: str | None, after: str | None) -> steps.Step:
        recs = [_capped(b, 1400.0), _capped(c, 1400.0)]
        for rec, mode in zip(recs, (before, after), strict=True):
            if mode:
                rec["measurement"]["mode"] = mode
        history = steps.History(_step_files([2.0e-4, 2.0e-4, 2.2e-4]), {}, recs,
                                {a: 0, b: 1, c: 2})
        (found,) = steps.find_steps(regressions, {"0": a, "1": b, "2": c}, ["m1"], history, th)
        return found

    crossed = step_of("graph", "events")
    assert (crossed.before.method, crossed.after.method) == ("graph", "events")
    assert crossed.text == ("x1.100, energy +0.0%, clock 1400 → 1400 MHz, 690 → 690 W of 700: "
                            "the clock held, not a clock effect; timed by graph replay before, "
                            "events around one call after: part of the step is the method's")
    for same in (("events", "events"), (None, "events"), (None, None)):
        assert "method" not in step_of(*same).text, same


def test_a_step_whose_energy_bursts_ran_differently_says_so() -> None:
    """An energy step whose bursts replayed a graph on one side and were launched call by
    call on the other (the host fell behind in one run's trials and not the other's): the
    line says part of the energy change is the method's. Records that do not say, bursts
    that ran alike, or a side whose records mix both add nothing against a mixed side."""
    from kperf.gate.config import Thresholds
    from kperf.site import steps

    a, b, c = "a" * 40, "b" * 40, "c" * 40
    name = "bench_gemm.GemmEnergy.track_energy('square-4096', 'fp16', 'tilelang')"
    graph = "graphs/arch-x86_64/branch-main/machine-m1/bench_gemm.GemmEnergy.track_energy.json"
    regressions = {"regressions": [[name, graph, {}, 0, 0.0655, 0.0605,
                                    [[1, 2, 0.0605, 0.0655]]]]}
    th = Thresholds.load(DEFAULTS / "thresholds.json")

    def step_of(before: list | None, after: list | None) -> steps.Step:
        recs = [_capped(b, 1400.0, energy_j=0.0605), _capped(c, 1400.0, energy_j=0.0655)]
        for rec, by_graph in zip(recs, (before, after), strict=True):
            if by_graph is not None:
                rec["measurement"]["energy_burst"] = {
                    "per_burst": [{"by_graph": g} for g in by_graph]}
        history = steps.History(_step_files([2.0e-4, 2.0e-4, 2.0e-4]), {}, recs,
                                {a: 0, b: 1, c: 2})
        (found,) = steps.find_steps(regressions, {"0": a, "1": b, "2": c}, ["m1"], history, th)
        return found

    flipped = step_of([False] * 3, [True] * 3)
    assert (flipped.before.burst_method, flipped.after.burst_method) == ("calls", "graph")
    assert flipped.text.endswith(
        "energy +8.3%, clock 1400 → 1400 MHz, 690 → 690 W of 700: the clock held, not a clock "
        "effect; energy bursts launched call by call before, replayed as a graph after: part "
        "of the energy change is the method's")
    assert "bursts some replayed" in step_of([True, False, True], [True] * 3).text
    for alike in (([True] * 3, [True] * 3), (None, [True] * 3), (None, None),
                  ([True, False], [False, True])):
        assert "bursts" not in step_of(*alike).text, alike


def test_a_step_whose_run_shared_the_gpu_names_the_other_process() -> None:
    """A record of the run after a step saw another process on the GPU: the step's line
    names it, as the gate's report does; a step without one says nothing of it."""
    from kperf.gate.config import Thresholds
    from kperf.site import steps

    a, b, c = "a" * 40, "b" * 40, "c" * 40
    name = "bench_gemm.GemmTime.track_time('square-4096', 'fp16', 'tilelang')"
    graph = "graphs/arch-x86_64/branch-main/machine-m1/bench_gemm.GemmTime.track_time.json"
    regressions = {"regressions": [[name, graph, {}, 0, 2.2e-4, 2.0e-4, [[1, 2, 2.0e-4, 2.2e-4]]]]}
    th = Thresholds.load(DEFAULTS / "thresholds.json")

    def step_of(shared: bool) -> steps.Step:
        recs = [_capped(b, 1400.0), _capped(c, 1400.0)]
        if shared:
            recs[1]["measurement"]["gpu_processes"] = {"others": [
                {"pid": 675, "name": "python3", "trials": [0, 1]}], "note": ""}
        history = steps.History(_step_files([2.0e-4, 2.0e-4, 2.2e-4]), {}, recs,
                                {a: 0, b: 1, c: 2})
        (found,) = steps.find_steps(regressions, {"0": a, "1": b, "2": c}, ["m1"], history, th)
        return found

    assert step_of(True).text.endswith(
        "; another process (pid 675, python3) used the GPU in the run after the step")
    assert "another process" not in step_of(False).text


def test_steps_and_their_causes_are_escaped() -> None:
    from kperf.site import steps

    step = steps.Step(HOSTILE, HOSTILE, "b", {}, steps.Side("d" * 40), steps.Side(HOSTILE),
                      1, cause="environment", why=HOSTILE, text=HOSTILE, id="x")
    html = headtohead.steps_table(HOSTILE, [step], "https://h/commit/")
    assert "<script>window" not in html and "<img src=x" not in html
    assert html.count("&lt;script&gt;window.__x=1&lt;/script&gt;") >= 3
