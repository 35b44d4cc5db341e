"""The gate's report (gate.md): hostile case names stay in their cell, base and head and
hidden characters are escaped."""

from __future__ import annotations

from kperf.gate import cli, report
from kperf.gate.model import Verdict

from .conftest import synthetic_thresholds


def test_hostile_case_names_stay_in_their_cell() -> None:
    name = "bench_x.X.track_time('a|b', '`c`', '<script>x</script>', '@you')"
    v = Verdict(name, "", "compute", "SLOW", reason="x | y", ratio=1.5)
    text = report.markdown([v], 1, {"label": "l|`", "base": "a" * 10, "head": "b" * 10,
                                    "base_how": "given as `HEAD~1`", "machine": "m|x",
                                    "design": "d", "alpha": 0.01, "beta": 0.05,
                                    "correction": "BH"})
    row = next(line for line in text.splitlines() if "bench" in line)
    cells = [c for c in row.split(" | ")]
    assert len(row.replace("\\|", "").split("|")) == 9, row  # 7 columns, 8 bars + ends
    assert "<script>" not in text and "@you" not in text and "&lt;script&gt;" in text
    assert "**SLOW**" in cells[-1]


def test_base_head_and_hidden_characters_are_escaped_in_the_report() -> None:
    """base and head go into gate.md as code only when they are commit ids; anything else
    (a gate-state.json written by hand) is escaped text. U+202E and its kin, which show a
    text reordered, and control characters are gone from every field."""
    v = Verdict("bench_x.X.track_time('a\u202eb', 'c\u2066d')", "", "compute", "SAME",
                reason="r\u200bs\x1b[31m")
    info = {"label": "l\u202e", "base": "[x](//e)`<img>", "head": "0123abcdef" * 4,
            "base_how": "h\u2067", "machine": "m", "design": "d", "alpha": 0.01,
            "beta": 0.05, "correction": "BH"}
    text = report.markdown([v], 0, info)
    assert "base \\[x\\](//e)\\`&lt; (h" in text, text  # the first 10 characters, as text
    assert "head `0123abcdef`" in text
    hidden = "\u202e\u2066\u2067\u200b\x1b"
    assert not set(hidden) & set(text), ascii(text)
    assert not set(hidden) & set(report.md("x\u202ey\x00z")), "md() itself"


def test_the_design_line_says_which_classes_were_timed_behind_a_hold() -> None:
    """A bandwidth case's before and after read below the history's (every rep held 150 us
    in the gate, none in the history): the report says so, once per class, and not for a
    run without such a class."""
    th = synthetic_thresholds()
    state = {"base": "a" * 40, "head": "b" * 40, "machine": "m"}
    rows = [Verdict(f"bench_rmsnorm.RmsnormTime.track_time('{b}')", "", "bandwidth", "SAME")
            for b in ("tilelang", "triton")]
    gemm = Verdict("bench_gemm.GemmTime.track_time('x')", "", "compute", "SAME")
    design = cli.info_of(state, [*rows, gemm], th)["design"]
    assert design.count("hold before each rep") == 1
    assert "; bandwidth cases timed behind a 150 µs hold before each rep" in design
    assert "hold" not in cli.info_of(state, [gemm], th)["design"]


def test_the_summary_says_which_moved_figures_are_static_not_timings() -> None:
    """The softmax edit on an H200 (vm-nvidia-h200-9d545b5a, 2026-12-04, docs/journal/
    2026-12-04.md): its Triton kernel 2.8% slower, and 56 registers instead of 64 with one
    more wave a SM: "1 slower, 3 faster" read as three faster timings. The static figures
    that moved are named as such."""
    time = Verdict("bench_softmax.SoftmaxTime.track_time('x')", "", "bandwidth", "SLOW")
    static = [Verdict(f"bench_softmax.Softmax{n}.track_value('sm_90a')", "", "static", "FAST",
                      unit=u) for n, u in (("Registers", "registers"), ("Occupancy", "waves"))]
    more = Verdict("bench_gemm.GemmRegisters.track_value('sm_90a')", "", "static", "SLOW",
                   unit="registers")
    line = report.summary_line([time, *static], 1)
    assert line.startswith("**REGRESSION** (exit 1): 1 slower, 2 faster (2 of them static "
                           "figures), 0 same"), line
    assert "1 slower, 0 faster" in report.summary_line([time], 1)
    assert "2 slower (1 of them static figures), 0 faster" in report.summary_line(
        [time, more], 1)


def test_a_case_timed_by_different_methods_on_the_sides_says_so(th) -> None:
    """Base replayed as a graph, head timed by events around one call (it crossed
    graph_below_s, or its estimate read the host): the verdict keeps the two methods and
    its reason says part of the change is theirs; one method on both sides, or blocks that
    do not say, add nothing."""
    from kperf.gate.look import decide_look
    from kperf.gate.model import side_methods
    from tests._gate import NORM, case, noisy, one

    def verdict(base: str | None, head: str | None) -> Verdict:
        data = case(NORM, noisy(1.0, 6, 0.001, 1), noisy(1.4, 6, 0.001, 2), clock=1980.0,
                    power=450.0, bits=0)
        for blk in data.blocks:
            blk.method = base if blk.side == "base" else head
        return one(decide_look([data], th, None, 1, th.sequential.looks), NORM)

    crossed = verdict("graph", "events")
    assert crossed.verdict == "SLOW" and crossed.methods == ("graph", "events")
    assert ("timed by graph replay at base, events around one call at head: part of the "
            "change is the method's") in report.fmt_verdict(crossed)
    assert crossed.as_dict()["methods"] == ("graph", "events")
    for same in (("events", "events"), ("graph", None), (None, None)):
        v = verdict(*same)
        assert v.methods is None and "method" not in report.fmt_verdict(v), same
    data = case(NORM, [1.0, 1.0], [1.0, 1.0])
    data.blocks[0].method, data.blocks[2].method = "graph", "events"  # base rounds differ
    data.blocks[1].method = data.blocks[3].method = "events"
    assert side_methods(data.pairs()) == ("mixed", "events")
