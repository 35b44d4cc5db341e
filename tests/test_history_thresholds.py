"""The history's regression thresholds (kperf/history/history_thresholds.py and
kperf/site/series.py): history-thresholds.json and docs/site.md in step with their A/A
data, every series given its class's threshold by asv's own matching of what
``kperf publish`` hands asv, and the rule that turns a class's spread into a threshold."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

import pytest

from kperf import project
from kperf.config import ConfigError
from kperf.gate import asvio
from kperf.gate.config import KernelClass, Thresholds
from kperf.history import aadata
from kperf.history import history_thresholds as ht
from kperf.project import DEFAULTS
from kperf.site.publish import series_thresholds
from tools.lab import thresholds_study as study

from .conftest import REPO

PROJECT = project.load(REPO)


@pytest.fixture(scope="module")
def discovered() -> list[dict]:
    return ht.discover(REPO / "benchmarks")


@functools.cache
def _table() -> dict:
    """The regressions_thresholds ``kperf publish`` hands asv for this repository."""
    table, problem = series_thresholds(REPO)
    assert not problem
    return table


def test_every_generated_file_is_in_step_with_the_data() -> None:
    gen = ht.generate(PROJECT)
    assert ht.stale(gen) == [], "run: kperf thresholds --write"


def test_asv_gives_every_series_its_class_threshold(discovered: list[dict],
                                                   tmp_path: Path) -> None:
    """What publish hands asv, as asv reads it (a config file of its own), matched as asv's
    publish matches it; each series' class from its op's declaration or the gate's rules
    (an Energy series from its Time twin's)."""
    from asv.config import Config

    conf = json.loads(json.dumps(asvio.load_project_conf(REPO / "asv.conf.json")))
    path = tmp_path / "asv.conf.json"
    path.write_text(json.dumps({**conf, "regressions_thresholds": _table()}))
    table = Config.load(str(path)).regressions_thresholds
    gate = Thresholds.load(DEFAULTS / "thresholds.json")
    history = ht.History.load(DEFAULTS / "history-thresholds.json")
    seen: dict[str, set[float]] = {}
    n = 0
    for bench in discovered:
        for s in ht.series_of([bench], gate, history):
            twin = s.name.replace("Energy.track_energy(", "Time.track_time(")
            _, klass = gate.rule_for(twin)
            measure = ("energy" if "Energy.track_energy(" in s.name else "time") \
                if not klass.exact and (klass.name, "time") in history.spreads else ""
            expected = history.series_threshold(s.name, klass, measure)
            assert asvio.asv_threshold(table, s.name) == expected, s.name
            seen.setdefault(f"{klass.name} {measure}".strip(), set()).add(expected)
            n += 1
    assert n > 400
    # the classes the issue named get thresholds apart: energy is not flagged like time
    assert seen["bandwidth time"] != seen["bandwidth energy"]
    assert seen["static"] == {0.0} and max(seen["compile time"]) > max(seen["compute time"])


def _history(tmp_path: Path, **change) -> Path:
    raw = json.loads((DEFAULTS / "history-thresholds.json").read_text())
    raw.update(change)
    path = tmp_path / "history-thresholds.json"
    path.write_text(json.dumps(raw))
    return path


def test_threshold_is_factor_times_spread_rounded_up_never_below_min_ratio(
        tmp_path: Path) -> None:
    classes = {"a": {"time": {"spread": 0.0024, "source": "x"},
                     "energy": {"spread": 0.059, "source": "y"}},
               "b": {"time": {"spread": None, "source": "none"},
                     "energy": {"same_as": "a.energy", "why": "like a"}}}
    history = ht.History.load(_history(tmp_path, factor=4, step=0.005, classes=classes))
    a, b = KernelClass("a", min_ratio=0.005), KernelClass("b", min_ratio=0.1)
    assert history.threshold(a, "time") == 0.01  # 4 x 0.24% = 0.96%, up to 1%
    assert history.threshold(a, "energy") == 0.24  # 23.6%, up to 24%
    assert history.threshold(KernelClass("a", min_ratio=0.02), "time") == 0.02
    assert history.threshold(b, "time") == 0.1  # not measured: the class's min_ratio
    assert history.threshold(b, "energy") == 0.24
    assert "as a.energy (like a)" in history.spreads[("b", "energy")].source
    assert history.threshold(KernelClass("s", exact=True), "") == 0.0
    assert history.threshold(KernelClass("compile", min_ratio=0.25), "") == 0.25


def test_a_heavy_tail_raises_the_threshold_to_tail_factor_times_the_tail(
        tmp_path: Path) -> None:
    """An entry's ``tail`` (a file written before it: its ``largest``) sets the threshold
    where tail_factor x it is more than factor x spread."""
    classes = {"a": {"time": {"spread": 0.0031, "source": "x"},
                     "energy": {"spread": 0.0062, "tail": 0.0816, "largest": 0.5,
                                "source": "y"}},
               "b": {"time": {"spread": 0.0099, "largest": 0.001, "source": "z"},
                     "energy": {"same_as": "a.energy", "why": "like a"}}}
    history = ht.History.load(_history(tmp_path, factor=4, tail_factor=1.25, step=0.005,
                                       classes=classes))
    a, b = KernelClass("a", min_ratio=0.005), KernelClass("b", min_ratio=0.005)
    assert history.threshold(a, "energy") == 0.105  # 1.25 x 8.16% = 10.2%, not 4 x 0.62%
    assert history.threshold(b, "energy") == 0.105  # same_as carries the largest along
    assert history.threshold(a, "time") == 0.015  # no largest: 4 x 0.31% = 1.24%, up to 1.5%
    assert history.threshold(b, "time") == 0.04  # a small largest leaves factor x spread
    untailed = ht.History.load(_history(tmp_path, factor=4, tail_factor=0, step=0.005,
                                        classes=classes))
    assert untailed.threshold(a, "energy") == 0.025


H200_HISTORY = REPO / "tests" / "data" / "h200-history-2026-12-03.json"
H200_PLACED = REPO / "tests" / "data" / "h200-history-2026-12-04-placed.json"
CPU_COMPILE = REPO / "tests" / "data" / "cpu-compile-aa-2026-12-06.json"
KV_A_NORM = "bench_rmsnorm.RmsnormTime.track_time('deepseek-v3.kv_a_norm', 'fp16', 'tilelang')"
SQUARE_GEMM = "bench_gemm.GemmTime.track_time('square-8192', 'fp16', 'triton')"


def _flagged(pairs: list[dict], table: dict) -> list[bool]:
    """Per pair: whether asv's publish would flag its series' rise from the first run to the
    second under ``table`` (one step of a two-commit history: its level rises by more than
    the threshold)."""
    return [p["second"] / p["first"] - 1.0 > asvio.asv_threshold(table, p["series"])
            for p in pairs]


def _aa_pairs() -> list[dict]:
    """Every pair of unchanged code in the repository's A/A data that the history measures
    as it does now: a class whose level follows placement only from placed runs (its
    unplaced series were of another method and asv version; docs/site.md, 'Where the
    history's buffers lie')."""
    from kperf.site.series import series_class

    gate = Thresholds.load(DEFAULTS / "thresholds.json")
    out = []
    for path in sorted((REPO / "tests" / "data").glob("h200-history-*.json")):
        raw = json.loads(path.read_text())
        for pairs in (v for v in raw.values() if isinstance(v, list)):
            out += [p for p in pairs if not p.get("code_changed") and (
                raw["placed"] or not series_class(p["series"], gate)[0].level_by_placement)]
    return out


def _crossing(pairs: list[dict], table: dict) -> list[tuple[str, str]]:
    """(series, way) of each A/A pair asv would flag in either order of its runs."""
    out = []
    for p in pairs:
        limit = asvio.asv_threshold(table, p["series"])
        out += [(p["series"], way) for way, a, b in (("rise", p["first"], p["second"]),
                                                     ("fall", p["second"], p["first"]))
                if b / a - 1.0 > limit]
    return out


def test_only_the_tail_past_the_quantile_crosses_its_threshold() -> None:
    """Every A/A pair of the repository's data, in both orders of its runs (which run is
    first is chance: a fall swapped is a rise), against asv.conf.json's thresholds. The
    tail is the 0.95 quantile (issue 51), so the one odd pair of the compute class, the
    square-8192 GEMM's -3.14% fall, no longer sets the class's threshold (4.5% under the
    largest move; 3% now) and is the one pair of 252 past it. The check sees falls: under
    bandwidth time 1% the RMSNorm kv_a_norm's -4.44% crosses, as a fall only."""
    pairs = _aa_pairs()
    assert len(pairs) == 252  # 32 compute pairs of 2026-12-03, 220 placed of 2026-12-04
    table = _table()
    assert _crossing(pairs, table) == [(SQUARE_GEMM, "fall")]
    assert asvio.asv_threshold(table, SQUARE_GEMM) == 0.03
    moves = {p["series"]: p["second"] / p["first"] - 1.0 for p in pairs}
    assert moves[KV_A_NORM] == pytest.approx(-0.0444, abs=1e-4)
    assert min(p["second"] / p["first"] - 1.0 for p in pairs if p["series"] == SQUARE_GEMM
               ) == pytest.approx(-0.0314, abs=1e-4)
    before = dict(table) | {k: 0.01 for k in table if "Rmsnorm" in k and "Time" in k}
    crossed = _crossing(pairs, before)
    assert (KV_A_NORM, "fall") in crossed
    assert not any(way == "rise" and s in (KV_A_NORM, SQUARE_GEMM) for s, way in crossed)


def test_every_aa_data_file_is_one_the_thresholds_come_from() -> None:
    """A data file added to tests/data without recomputing the figures fails here."""
    data = REPO / "tests" / "data"
    names = {f"tests/data/{p.name}" for pattern in ("h200-history-*.json", "cpu-compile-aa-*.json")
             for p in data.glob(pattern)}
    assert set(ht.History.load_raw(DEFAULTS / "history-thresholds.json")["data"]) == names


def test_history_thresholds_json_is_what_the_data_gives(tmp_path: Path) -> None:
    """Every figure of history-thresholds.json is what the command computes from the data
    files it names: a figure typed by hand makes it stale, and --write puts the computed one
    back. The figures as measured: the bandwidth time class without its two-level series,
    the compute time class's largest move a fall."""
    raw = ht.History.load_raw(DEFAULTS / "history-thresholds.json")
    gen = ht.generate(PROJECT)
    assert gen.history_text == (DEFAULTS / "history-thresholds.json").read_text()
    bw, cp = raw["classes"]["bandwidth"]["time"], raw["classes"]["compute"]["time"]
    assert bw["pairs"] == 59 and bw["largest"] < 0.005 < raw["two_level"][KV_A_NORM]["largest"]
    assert bw["from"] == {"tests/data/h200-history-2026-12-04-placed.json": 59}
    assert cp["fall"]["series"] == SQUARE_GEMM and cp["largest"] == pytest.approx(0.0324, abs=1e-4)
    assert cp["largest"] > cp["rise"]["move"]  # the fall, swapped, is the largest
    repo = _copy_repo(tmp_path)
    path = repo / "history-thresholds.json"
    typed = json.loads(path.read_text())
    typed["classes"]["bandwidth"]["time"]["largest"] = 0.0228  # the journal's figure
    path.write_text(json.dumps(typed, indent=1) + "\n")
    regen = ht.generate(project.load(repo))
    assert [Path(p).name for p in ht.stale(regen)] == ["history-thresholds.json"]
    assert regen.history_text == gen.history_text


def test_from_data_computes_the_figures_from_the_files_given(tmp_path: Path) -> None:
    """--from-data: the placed file alone shows each of kv_a_norm's levels once, so its
    two_level entry is refused; without it, the compute class takes that file's 40 pairs
    of 2026-12-04 (largest 1.89%) and history-thresholds.json names that file only."""
    placed, compiles = f"tests/data/{H200_PLACED.name}", f"tests/data/{CPU_COMPILE.name}"
    with pytest.raises(ConfigError, match="seen 1 time"):
        ht.generate(PROJECT, [placed, compiles])
    with pytest.raises(ConfigError, match="measures compile time"):  # a class left unmeasured
        ht.generate(PROJECT, [placed])
    repo = _copy_repo(tmp_path)
    path = repo / "history-thresholds.json"
    raw = json.loads(path.read_text())
    del raw["two_level"]
    path.write_text(json.dumps(raw))
    gen = ht.generate(project.load(repo), [placed, compiles])
    raw = json.loads(gen.history_text)
    assert raw["data"] == {placed: 220, compiles: 49}
    compute = raw["classes"]["compute"]["time"]
    assert compute["pairs"] == 40 and compute["largest"] == pytest.approx(0.0189, abs=1e-4)


def test_new_aa_data_changes_every_generated_file_until_written(tmp_path: Path) -> None:
    """Four new A/A pairs whose SwiGLU moved 1% (placed) raise the bandwidth time class's
    0.95 quantile to 0.95% and its threshold to 1.5 x that -> 1.5%: both files go stale
    together, and the thresholds publish hands asv follow. (One such pair of 60 would not:
    the quantile is there so that one odd pair does not set a class.)"""
    repo = _copy_repo(tmp_path)
    data = repo / "tests" / "data" / H200_PLACED.name
    raw = json.loads(data.read_text())
    raw["aa"] += [{"series": f"bench_swiglu.SwigluTime.track_time('llama3-8b.mlp', '{dtype}', "
                             f"'{lang}')", "first": 1.0e-4, "second": 0.99e-4,
                   "pair": "row ops"} for dtype in ("fp16", "bf16")
                  for lang in ("triton", "tilelang")]
    data.write_text(json.dumps(raw))
    gen = ht.generate(project.load(repo))
    assert sorted(Path(p).name for p in ht.stale(gen)) == ["history-thresholds.json", "site.md"]
    assert 0.015 in {e.threshold for e in gen.entries if "bandwidth time" in e.label}
    assert "`--factor 1.015`" in gen.doc_text
    for path, text in ht._targets(gen):
        path.write_text(text)
    assert ht.stale(ht.generate(project.load(repo))) == []


def test_a_two_level_series_gets_its_own_threshold_and_not_its_class(tmp_path: Path) -> None:
    """The RMSNorm kv_a_norm fp16 TileLang lies at two levels (8.33 and 8.69-8.72 us); set
    apart, it gets 1.5 x its own -4.44% (swapped +4.65%): 7%, its twins their class's 0.5%.
    Left in its class, its one placed pair lies past the class's 0.95 quantile: the class
    stays at 0.5% and the series' every change of level would be flagged (under the rule
    before, 1.25 x the largest, it set the whole class to 6%)."""
    table = _table()
    assert asvio.asv_threshold(table, KV_A_NORM) == 0.07
    for twin in (KV_A_NORM.replace("'fp16'", "'bf16'"), KV_A_NORM.replace("tilelang", "triton"),
                 KV_A_NORM.replace("deepseek-v3.kv_a_norm", "llama3-8b.hidden")):
        assert asvio.asv_threshold(table, twin) == 0.005, twin
    raw = ht.History.load_raw(DEFAULTS / "history-thresholds.json")
    (low, high) = raw["two_level"][KV_A_NORM]["levels"]
    assert low[1] < 8.35e-6 < 8.65e-6 < high[0] and (low[2], high[2]) == (4, 2)
    repo = _copy_repo(tmp_path)
    path = repo / "history-thresholds.json"
    del raw["two_level"]
    path.write_text(json.dumps(raw))
    gen = ht.generate(project.load(repo))
    bandwidth_time = {s.threshold for s in gen.series if (s.klass, s.measure) == (
        "bandwidth", "time")}
    assert bandwidth_time == {0.005}
    [move] = ht.History.load_raw(DEFAULTS / "history-thresholds.json")["two_level"][
        KV_A_NORM]["moves"]
    assert abs(move) > 0.005


def test_a_series_named_two_level_whose_data_shows_one_level_is_refused(
        tmp_path: Path) -> None:
    one = "bench_rmsnorm.RmsnormTime.track_time('llama3-8b.hidden', 'fp16', 'tilelang')"
    repo = _copy_repo(tmp_path)
    path = repo / "history-thresholds.json"
    raw = json.loads(path.read_text())
    raw["two_level"][one] = {"why": "typed by hand"}
    path.write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="no two levels") as err:
        ht.generate(project.load(repo))
    assert err.value.pointer == f"/two_level/{one}"
    assert aadata.two_levels_shown([[8.33, 8.34, 4], [8.69, 8.72, 2]], 0.01) == ""
    assert "seen 1 time" in aadata.two_levels_shown([[8.33, 8.34, 5], [8.69, 8.69, 1]], 0.01)
    assert "spreads" in aadata.two_levels_shown([[8.0, 8.34, 4], [8.69, 8.72, 2]], 0.01)
    assert "within" in aadata.two_levels_shown([[8.33, 8.34, 4], [8.40, 8.41, 2]], 0.01)


def test_unplaced_runs_of_a_placed_class_are_not_its_data(tmp_path: Path) -> None:
    """The decode16 TileLang GEMM's unplaced runs (2026-12-03) moved -13.4%; the decode
    class is placed now, so its figures come from the placed file only."""
    raw = ht.History.load_raw(DEFAULTS / "history-thresholds.json")
    for klass in ("bandwidth", "decode"):
        for measure in ("time", "energy"):
            assert list(raw["classes"][klass][measure]["from"]) == [
                "tests/data/h200-history-2026-12-04-placed.json"], (klass, measure)
    assert set(raw["classes"]["compute"]["time"]["from"]) == {
        f for f in raw["data"] if "h200-history" in f}
    assert list(raw["classes"]["compile"]["time"]["from"]) == [f"tests/data/{CPU_COMPILE.name}"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"aa": []}))
    with pytest.raises(ConfigError, match="placed"):
        aadata.load_pairs(tmp_path, ["bad.json"])


def test_the_h200_history_flags_the_changed_kernels_and_no_unchanged_one() -> None:
    """A history whose second commit made the Triton GEMM and RMSNorm slower
    (tests/data/h200-history-2026-12-03.json): under asv.conf.json the changed kernels'
    clear steps are flagged, the GEMM's +4.3% time steps too (under the rule before, the
    compute class's largest move set it to 4.5% and they were missed). One unchanged series
    is flagged: the SwiGLU's +0.60% time, run before the history placed its buffers
    (bandwidth time is 0.5% from placed runs; docs/site.md, 'Where the history's buffers
    lie')."""
    data = json.loads(H200_HISTORY.read_text())
    table = _table()
    pairs = data["history"]
    flagged = dict(zip(map(id, pairs), _flagged(pairs, table), strict=True))
    unchanged = [p for p in pairs if not p["code_changed"]]
    assert len(unchanged) == 40
    assert [p["series"] for p in unchanged if flagged[id(p)]] == [
        "bench_swiglu.SwigluTime.track_time('llama3-8b.mlp', 'fp16', 'tilelang')"]
    clear = [p for p in pairs if p["code_changed"] and p["second"] / p["first"] > 1.08]
    assert len(clear) == 9  # RMSNorm Triton time and energy x 4, the GEMM's fp16 energy
    assert all(flagged[id(p)] for p in clear)
    gemm_time = [p for p in pairs if p["code_changed"]
                 and p["series"].startswith("bench_gemm.GemmTime.track_time('square-8192'")]
    assert len(gemm_time) == 2 and all(flagged[id(p)] for p in gemm_time)
    assert all(0.04 < p["second"] / p["first"] - 1.0 < 0.045 for p in gemm_time)


def test_a_fresh_h200_history_flags_its_changed_kernels_and_no_unchanged_one() -> None:
    """Out of sample: a third pair (the data's ``out_of_sample``) whose second commit removed
    the TileLang GEMM's rasterization swizzle and halved the Triton LayerNorm's warps. Under
    asv.conf.json the changed kernels' clear steps are flagged, the TileLang GEMM's fp16 one
    in time and energy, and its llama3-8b.down_proj fp16 step (+3.2%; under the compute
    class's 4.5% of the rule before, over its 3% now); no unchanged series."""
    data = json.loads(H200_HISTORY.read_text())
    pairs = data["out_of_sample"]
    flagged = [p["series"] for p, f in zip(pairs, _flagged(pairs, _table()), strict=True) if f]
    assert sorted(flagged) == sorted([
        "bench_gemm.GemmTime.track_time('square-8192', 'fp16', 'tilelang')",
        "bench_gemm.GemmTime.track_time('square-8192', 'bf16', 'tilelang')",
        "bench_gemm.GemmEnergy.track_energy('square-8192', 'fp16', 'tilelang')",
        "bench_gemm.GemmTime.track_time('llama3-8b.down_proj', 'fp16', 'tilelang')",
        "bench_layernorm.LayernormTime.track_time('falcon-40b.hidden', 'bf16', 'triton')",
    ])


@pytest.mark.parametrize(("change", "field", "message"), [
    ({"factor": 0}, "/factor", "less than the minimum of 1"),
    ({"classes": {"a": {"time": {"same_as": "a.energy", "why": "w"},
                        "energy": {"same_as": "a.time", "why": "w"}}}},
     "/classes/a/time/same_as", "circle"),
    ({"classes": {"a": {"time": {"same_as": "zz.time", "why": "w"},
                        "energy": {"spread": 0.1, "source": "s"}}}},
     "/classes/a/time/same_as", "names no class"),
    ({"classes": {"a": {"time": {"spread": 2, "source": "s"},
                        "energy": {"spread": 0.1, "source": "s"}}}},
     "/classes/a/time", "valid under"),
])
def test_a_bad_history_file_names_the_file_and_field(tmp_path: Path, change: dict,
                                                     field: str, message: str) -> None:
    path = _history(tmp_path, **change)
    with pytest.raises(ConfigError, match=message) as err:
        ht.History.load(path)
    assert err.value.source == str(path) and err.value.pointer.startswith(field)


def test_a_timed_class_without_a_spread_is_refused(tmp_path: Path,
                                                   discovered: list[dict]) -> None:
    raw = json.loads((DEFAULTS / "history-thresholds.json").read_text())
    del raw["classes"]["compute"]
    path = tmp_path / "history-thresholds.json"
    path.write_text(json.dumps(raw))
    gate = Thresholds.load(DEFAULTS / "thresholds.json")
    with pytest.raises(ConfigError, match="class 'compute'") as err:
        ht.series_of(discovered, gate, ht.History.load(path))
    assert err.value.pointer == "/classes/compute"


def _copy_repo(tmp_path: Path) -> Path:
    """A project of the repository's ops and data, with thresholds files of its own."""
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    for name in ("asv.conf.json", "kperf.toml", "docs/site.md"):
        shutil.copyfile(REPO / name, repo / name)
    for name in ("thresholds.json", "history-thresholds.json"):
        shutil.copyfile(DEFAULTS / name, repo / name)
    shutil.copytree(REPO / "tests" / "data", repo / "tests" / "data")
    (repo / "benchmarks").symlink_to(REPO / "benchmarks")
    (repo / "kernels").symlink_to(REPO / "kernels")
    return repo


def test_a_project_without_the_docs_table_writes_its_thresholds_only(tmp_path: Path) -> None:
    """A team's repository has no docs/site.md: --write rewrites history-thresholds.json
    alone."""
    repo = _copy_repo(tmp_path)
    (repo / "docs" / "site.md").unlink()
    gen = ht.generate(project.load(repo))
    assert [path.name for path, _ in ht._targets(gen)] == ["history-thresholds.json"]


def test_asvs_step_detection_flags_a_clear_step_and_not_noise() -> None:
    """The simulation behind docs/site.md's "What asv's step detection finds" runs asv's
    own detector: a step of three thresholds over two runs is found, noise alone is not,
    and a longer noisy history finds a step of 1.2 thresholds less often than two runs."""
    sd = 0.0025
    assert study.detection(0.01, sd, 2, 0.03, draws=60) >= 0.95
    assert study.detection(0.01, sd, 2, 0.0, draws=60) <= 0.05
    assert study.detection(0.01, sd, 10, 0.012, draws=60) < study.detection(0.01, sd, 2, 0.012,
                                                                       draws=60)

