"""Red only where it costs (issue 49): a register, LDS or code-size move the bad way is SLOW
where the kernel pays for it (occupancy falls, spills or scratch grow, it cannot launch),
and SAME, "changed", with the headroom left at its occupancy where it does not. Figures as
the gate's static blocks carry them (every figure of the kernel's code)."""

from __future__ import annotations

from kperf.core import codeobj
from kperf.gate.errors import EXIT_PASS, EXIT_REGRESSION
from kperf.gate.model import Block, CaseData
from kperf.gate.sequential import exit_code, replay

ATTN = "bench_attention.AttentionRegisters.track_value('gfx942', 'fp16', 'tilelang')"
LDS = "bench_gemm.GemmSharedMem.track_value('gfx942', 'fp16', 'tilelang')"
FP8 = "bench_fp8_gemm.Fp8GemmRegisters.track_value('gfx942', 'e4m3', 'triton')"
NV = "bench_gemm.GemmRegisters.track_value('sm_90a', 'fp16', 'triton')"


def gfx942(vgprs: int, lds: int = 0, spills: int = 0, threads: int = 256) -> dict:
    waves, limit = codeobj.occupancy(vgprs, 40, lds, threads)
    return {"registers": vgprs, "sgprs": 40, "vgpr_spills": spills, "sgpr_spills": 0,
            "scratch_bytes": 4 * spills, "shared_bytes": lds, "threads": threads,
            "occupancy": waves, "occupancy_limit": limit}


def static_case(name: str, key: str, base: dict, head: dict) -> CaseData:
    return CaseData(name, unit="registers", blocks=[
        Block("base", 1, value=float(base[key]), figures=base),
        Block("head", 1, value=float(head[key]), figures=head)])


def test_registers_at_unchanged_occupancy_are_changed_with_their_headroom(th) -> None:
    """The packing edit of issue 49: VGPRs 252 -> 256 at 2 waves (here), no cost."""
    (v,) = replay([static_case(ATTN, "registers", gfx942(252), gfx942(256))], th)
    assert v.verdict == "SAME" and v.decided, v
    assert v.reason == "changed, no cost: occupancy 2 unchanged; 256 of 256 VGPRs for 2 waves"
    assert exit_code([v]) == EXIT_PASS


def test_an_occupancy_fall_a_new_spill_and_an_lds_overflow_stay_slow(th) -> None:
    fell = static_case(FP8, "registers", gfx942(228), gfx942(260))  # 2 -> 1 wave
    spill = static_case(ATTN, "registers", gfx942(200, spills=0), gfx942(204, spills=3))
    over = static_case(LDS, "shared_bytes", gfx942(128, lds=32768), gfx942(128, lds=81920))
    verdicts = replay([fell, spill, over], th)
    by_case = {v.case: v for v in verdicts}
    assert [v.verdict for v in verdicts] == ["SLOW"] * 3
    assert by_case[FP8].reason == "costs: occupancy 2 → 1 (VGPRs)"
    assert by_case[ATTN].reason == "costs: VGPR spills 0 → 3, scratch bytes 0 → 12"
    assert by_case[LDS].reason.startswith("costs: occupancy 2 → 0 (LDS over 64 KiB")
    assert "cannot launch" in by_case[LDS].reason
    assert exit_code(verdicts) == EXIT_REGRESSION


def test_sm90a_headroom_is_registers_a_thread_for_its_warps(th) -> None:
    def nv(regs: int) -> dict:
        return {"registers": regs, "threads": 128, "shared_bytes": 0, "occupancy": 8.0,
                "occupancy_limit": "registers"}

    (v,) = replay([static_case(NV, "registers", nv(56), nv(64))], th)
    assert v.verdict == "SAME"
    assert v.reason == ("changed, no cost: occupancy 8 unchanged; 64 of 64 registers a "
                        "thread for 8 warps a scheduler")


def test_without_the_figures_a_move_stays_slow(th) -> None:
    """A block that does not say its occupancy (an older run's) is not forgiven."""
    case = CaseData(ATTN, unit="registers", blocks=[Block("base", 1, value=252.0),
                                                    Block("head", 1, value=256.0)])
    (v,) = replay([case], th)
    assert v.verdict == "SLOW" and v.reason.startswith("costs: unknown")


def test_occupancy_and_scratch_stay_exact_whatever_the_headroom(th) -> None:
    """Their own move is the cost: any move the bad way is SLOW."""
    occ = "bench_attention.AttentionOccupancy.track_value('gfx942', 'fp16', 'tilelang')"
    scratch = "bench_attention.AttentionScratch.track_value('gfx942', 'fp16', 'tilelang')"
    verdicts = replay([
        CaseData(occ, unit="waves", blocks=[Block("base", 1, value=2.0),
                                            Block("head", 1, value=1.0)]),
        CaseData(scratch, unit="bytes", blocks=[Block("base", 1, value=0.0),
                                                Block("head", 1, value=16.0)])], th)
    assert [v.verdict for v in verdicts] == ["SLOW", "SLOW"]


class _Records:
    """A published history as steps.explain_code reads it: each commit's codegen figures."""

    def __init__(self, figures: dict[str, dict], values: dict[str, float]) -> None:
        self.figures, self.values = figures, values

    def value(self, machine: str, commit: str, bench: str, idx: int, graph: object) -> float:
        return self.values[commit]

    def files_of(self, machine: str, commit: str, graph: object) -> list:
        return []

    def records_in(self, key: str, envs: object) -> list[dict]:
        commit = key.split("|")[1]
        return [{"figures": {**self.figures[commit], "code_sha": commit}, "recorded_at": 1}]


def _history_step(base: dict, head: dict, benchmark: str) -> object:
    from kperf.site import steps
    from kperf.site.steps import Side, Step

    step = Step(series=benchmark, machine="m", time_benchmark=benchmark,
                params={"target": "gfx942", "dtype": "fp16", "backend": "tilelang"},
                before=Side("a" * 40), after=Side("b" * 40), revision=2)
    history = _Records({"a" * 40: base, "b" * 40: head},
                       {"a" * 40: float(base["registers"]), "b" * 40: float(head["registers"])})
    steps.explain_code(step, 0, history)
    return step


def test_the_historys_flags_follow_the_same_rule() -> None:
    """A register step at the same occupancy is "changed, no cost" on the regressions page
    (not the code's regression, in red); one that lowers the occupancy stays the code's."""
    from kperf.site.steps import summary

    bench = "bench_attention.AttentionRegisters.track_value"
    quiet = _history_step(gfx942(244), gfx942(252), bench)
    assert quiet.cause == "no-cost", (quiet.cause, quiet.why)
    assert "252 of 256 VGPRs for 2 waves" in quiet.why and "changed, no cost" in summary(quiet)
    costly = _history_step(gfx942(252), gfx942(260), bench)
    assert costly.cause == "code" and costly.why == "the generated code changed"
    assert costly.text.startswith("occupancy 2 → 1 waves"), costly.text
