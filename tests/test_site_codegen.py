"""The codegen page (kperf/site/codegen.py, codegen.py), built from real records
(tests/codegen_fixture.py): every op beside Triton, where each figure is from and why one
is missing, and what records say escaped."""

from __future__ import annotations

import statistics
from pathlib import Path

from kperf.site import codegen, data, pages

from . import codegen_fixture
from ._site import HOSTILE


def _codegen_view(tmp_path: Path) -> codegen.MachineView:
    """The real records of tests/data/codegen-records.json, read back from where the
    suites keep them."""
    codegen_fixture.place(codegen_fixture.load(), tmp_path / ".asv", "c" * 40, "cpu")
    notes = data.Notes()
    recs = data.read_records(codegen.roots_beside([tmp_path / ".asv" / "records"]), notes)
    assert notes.items == [] and {r["kind"] for r in recs} == {"codegen", "compile"}
    (view,) = codegen.build(recs, {})
    return view


def _fixture_records(kind: str, target: str, backend: str, toolchain: str = "clang19",
                     op: str = "") -> list[dict]:
    """The fixture's records of one target and backend (sm_90a: one per environment)."""
    return [r for r in codegen_fixture.load() if r["kind"] == kind
            and r["benchmark"].startswith(op) and r["params"]["target"] == target
            and r["params"]["backend"] == backend and r["env_name"].endswith(toolchain)]


def _fixture_record(kind: str, op: str, target: str, backend: str) -> dict:
    (rec,) = _fixture_records(kind, target, backend, op=f"bench_{op}.")
    return rec


def test_codegen_page_sets_every_op_beside_triton(tmp_path: Path) -> None:
    view = _codegen_view(tmp_path)
    assert view.commit == "c" * 40 and view.machine == "cpu"
    assert [g.label for g in view.groups] == ["gfx942 · clang19", "gfx942 · rocm-7.2.2",
                                              "sm_90a"]
    assert [t.op for t in view.tables] == list(codegen_fixture.OPS)
    gfx942 = [g for g in view.groups if g.target == "gfx942"]
    for table in view.tables:
        for g in gfx942:
            for backend in codegen.BACKENDS:
                cell = table.cells[(g, backend)]
                for key in ("registers", "sgprs", "vgpr_spills", "shared_bytes", "occupancy",
                            "code_bytes", "isa.instructions"):
                    assert isinstance(codegen.value(cell, key), int), (table.op, g, backend, key)
                assert cell.compile_s and cell.compile_s > 0
    gemm = view.tables[codegen_fixture.OPS.index("gemm")]
    summary = codegen.op_summary(gemm, view.groups)
    clang19 = gfx942[0]
    for backend in codegen.BACKENDS:
        rec = _fixture_record("codegen", "gemm", "gfx942", backend)
        assert gemm.cells[(clang19, backend)].figures == rec["figures"]
        reads = {k: v for k, v in rec["figures"].items() if k.startswith("isa.lds_read.")}
        widest = max(reads, key=reads.get)
        said = (f"{codegen.NAMES[backend]} {widest.rsplit('.', 1)[1]}-bit {reads[widest]} of "
                f"{sum(reads.values())}")
        assert any(line.startswith("LDS reads") and said in line for line in summary)
        timed = _fixture_record("compile", "gemm", "gfx942", backend)
        seconds = statistics.median(timed["samples"])
        assert gemm.cells[(clang19, backend)].compile_s == seconds
        compile_line = next(x for x in summary if x.startswith("compile (gfx942 · clang19)"))
        assert f"{codegen.NAMES[backend]} {pages.fmt_num(seconds, 2)} s" in compile_line
    sm90 = gemm.cells[(view.groups[-1], "tilelang")]
    assert sm90.figures == _fixture_records("codegen", "sm_90a", "tilelang", op="bench_gemm.")[
        0]["figures"]
    claims = codegen.claims(view.tables, view.groups)
    wide = {}
    for b in codegen.BACKENDS:
        figs = [r["figures"] for r in _fixture_records("codegen", "gfx942", b)]
        every = sum(v for f in figs for k, v in f.items() if k.startswith("isa.lds_read."))
        wide[b] = f"{sum(f.get('isa.lds_read.128', 0) for f in figs)} of {every}"
    assert f"gfx942 · clang19: LDS reads that are 128-bit, static counts over all ops: " \
           f"TileLang {wide['tilelang']} (" in "\n".join(claims)
    assert f"; Triton {wide['triton']} (" in next(c for c in claims if "clang19: LDS reads" in c)
    times = {b: {r["benchmark"]: statistics.median(r["samples"])
                 for r in _fixture_records("compile", "gfx942", b)} for b in codegen.BACKENDS}
    faster = sum(times["tilelang"][k] < times["triton"][k] for k in times["tilelang"])
    assert f"gfx942 · clang19: TileLang compiled to a code object faster than Triton in " \
           f"{faster} of 7 ops" in claims[0]
    html = codegen.render([view], data.Notes(), "", {})
    assert html.count('<table class="codegen"') == 7


def _cg(kind: str, commit: str, target: str, backend: str, **extra) -> dict:
    suite = "CodeSize.track_value" if kind == "codegen" else "Compile.track_compile"
    rec = {"schema": "kperf-record-2", "benchmark": f"bench_gemm.Gemm{suite}", "kind": kind,
           "params": {"target": target, "dtype": "fp16", "backend": backend},
           "machine": "m1", "commit": commit, "env_name": "env-" + str(extra.get("toolchain")),
           "recorded_at": 1.0}
    return rec | extra


def test_codegen_page_says_where_each_figure_is_from_and_why_one_is_missing() -> None:
    old, new = "a" * 40, "b" * 40
    figures = {"registers": 144, "occupancy": 3, "occupancy_limit": "VGPRs",
               "isa.lds_read.16": 32, "isa.lds_read.128": 4, "isa.matrix": 32}
    recs = [_cg("codegen", new, "gfx942", "tilelang", toolchain="clang19", op="gemm",
                case="square-4096", figures=figures, recorded_at=2.0),
            _cg("codegen", old, "gfx942", "triton", toolchain="clang19", op="gemm",
                case="square-4096", figures={"registers": 200}),
            _cg("codegen", old, "gfx942", "tilelang", toolchain="rocm-7.2.2", op="gemm",
                case="square-4096", figures=figures | {"registers": 148}),
            _cg("compile", old, "gfx942", "tilelang", toolchain="clang19",
                samples=[1.0, 3.0, 2.0]),
            _cg("compile", new, "gfx942", "tilelang", toolchain="rocm-7.2.2", samples=[9.0]),
            _cg("codegen", new, "sm_90a", "triton", op="gemm", case="square-4096",
                figures={"registers": 168}),
            _cg("compile", new, "sm_90a", "triton", samples=7.0, _source="odd.json"),
            _cg("codegen", new, "sm_90a", "tilelang", figures=["not", "a", "dict"],
                _source="odder.json")]
    notes = data.Notes()
    (view,) = codegen.build(recs, {old: 1, new: 2}, notes)
    assert [where for where, _ in notes.items] == ["odd.json", "odder.json"]
    clang19, rocm, sm90 = view.groups
    assert view.commit == new and view.group_commit[rocm] == old
    (table,) = view.tables
    tl = table.cells[(clang19, "tilelang")]
    assert tl.compile_s == 2.0 and tl.compile_at == old  # unchanged since, timed there
    assert table.cells[(rocm, "tilelang")].compile_s is None  # a later commit's is not its own
    assert codegen.value(tl, "isa.lds_read.64") == 0 and codegen.value(tl, "agprs") is None
    triton = table.cells[(clang19, "triton")]
    assert triton.figures is None and "no CodeSize record of triton" in triton.why
    assert "TileLang by toolchain: clang19 144 VGPRs, occupancy 3; rocm-7.2.2 148 VGPRs, " \
           "occupancy 3" in codegen.op_summary(table, view.groups)
    html = codegen.render([view], data.Notes(), "https://h/commit/", {})
    assert "@aaaaaaaa" in html and 'data-v="2.0"' in html
    assert "not among this record&#39;s figures" in html
    assert codegen.value(table.cells[(sm90, "triton")], "isa.matrix") is None
    assert "no instruction mix in this record" in html


def test_codegen_page_escapes_what_records_say() -> None:
    rec = _cg("codegen", "c" * 40, "gfx942", "tilelang", toolchain=HOSTILE, op=HOSTILE,
              case=HOSTILE, figures={"registers": 1, "occupancy": 8, "occupancy_limit": HOSTILE,
                                     HOSTILE: HOSTILE})
    rec["machine"] = rec["env_name"] = HOSTILE
    views = codegen.build([rec], {})
    html = codegen.render(views, data.Notes([(HOSTILE, HOSTILE)]), "https://h/commit/",
                               {"c" * 40: {"subject": HOSTILE, "time": 0}})
    assert "<script>window" not in html and "<img src=x" not in html
    assert html.count("&lt;script&gt;window.__x=1&lt;/script&gt;") >= 8


def test_the_figures_stand_beside_each_machines_latest_time_per_call() -> None:
    """Per machine its latest commit's times (a backend not timed there is not shown, nor
    taken from an earlier commit), for the table's suite, case and dtype."""
    old, new = "a" * 40, "b" * 40

    def timed(machine: str, commit: str, tilelang: float | None, triton: float | None):
        row = {"result": [tilelang, triton], "params": [["'square-4096'"], ["'fp16'"],
                                                         ["'tilelang'", "'triton'"]]}
        return data.ResultFile(machine=machine, commit=commit, env_name="env", date=1,
                               label="x", results={"bench_gemm.GemmTime.track_time": row})

    files = [timed("gpu2", old, 5e-5, 6e-5), timed("gpu1", new, 2e-5, float("nan")),
             timed("gpu1", old, 3e-5, 4e-5)]
    found = codegen.timings_beside(files, {}, {old: 1, new: 2})
    assert found == {("bench_gemm.Gemm", "square-4096", "fp16"): [
        codegen.Timing("gpu1", new, {"tilelang": 2e-5}),
        codegen.Timing("gpu2", old, {"tilelang": 5e-5, "triton": 6e-5})]}
