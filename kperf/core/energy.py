"""Energy per call: after the trials, bursts of calls back to back, their mean power read
from the energy counter's updates (or the power readings) times their device time per call
(``Plan.energy_s``, ``Plan.energy_bursts``)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from kperf.core.plan import Plan
from kperf.core.reps import Runner
from kperf.core.telemetry import Sampler

ENERGY_POLL_S = 0.002  # the counter's update instants to ~2 ms during the burst
# A burst launched call by call whose calls took this much longer than the trials' median
# call had idle gaps: the host could not launch them as fast as the GPU ran them, and the
# gaps' idle power would count as the calls' energy. Such a burst is dropped and the
# bursts replay a graph (``Runner.graph_bursts``). Bursts without gaps read 0.98-0.99x the
# trials' call (TileLang and Triton LayerNorm, unplaced); with their outputs placed, Triton
# RMSNorm llama3-8b read 1.5-1.6x and two Triton SwiGLUs 1.10x while their trials, held
# 150 us a rep, never showed the host behind (H200s vm-nvidia-h200-a32a728f and -84eaee71,
# 2026-12-04, docs/journal/2026-12-04.md "Evening of 2026-12-04").
BURST_GAP_RATIO = 1.05


def energy_bursts(runner: Runner, plan: Plan, sampler: Sampler, call_s: float,
                   clock: Callable[[], float]) -> list[dict[str, Any]]:
    """``plan.energy_bursts`` bursts of calls back to back for ``plan.energy_s`` each,
    bracketed by host times for the energy counter; none when the source reads no energy
    (or power) at all."""
    if plan.energy_s <= 0 or plan.energy_bursts < 1 or not sampler.has_energy():
        return []
    calls = int(max(runner.calls_per_rep, plan.energy_s / max(call_s, 1e-9)))
    bursts: list[dict[str, Any]] = []
    gapped_s: float | None = None  # a dropped burst's seconds per call
    with sampler.polling_every(ENERGY_POLL_S):
        while len(bursts) < plan.energy_bursts:
            runner.burst_graph()  # any capture before the window (``Runner.burst_graph``)
            t0 = clock()
            device_s, done = runner.burst(calls)
            t1 = clock()
            if _gapped(runner, device_s / done, call_s):
                runner.graph_bursts, gapped_s = True, device_s / done
                continue
            bursts.append({"calls": done, "device_s": device_s, "span_s": t1 - t0,
                           "t0": t0, "t1": t1, "by_graph": runner.last_burst_by_graph,
                           "dropped_gapped_s_per_call": gapped_s})
    return bursts


def _gapped(runner: Runner, per_call_s: float, call_s: float) -> bool:
    """A burst launched call by call (no burst dropped yet) whose calls took over BURST_GAP_RATIO
    times the trials' call, on a device whose graphs could take the gaps out."""
    return (not runner.last_burst_by_graph and not runner.graph_bursts
            and runner.device.supports_graphs and per_call_s > BURST_GAP_RATIO * call_s)


def counter_stream(updates: list[tuple[float, float]], start: float) -> list[list[float]]:
    """The counter's updates in a burst as [seconds since the burst began, joules since its
    first update]: what ``tools.lab.burst_replay`` needs to say what a shorter burst would
    have read, from the same run (the H200's counter moves every ~100 ms)."""
    if not updates:
        return []
    first_j = updates[0][1]
    return [[round(t - start, 6), round(e - first_j, 6)] for t, e in updates]


def _burst_power(burst: dict[str, Any], sampler: Sampler) -> float | None:
    """A burst's mean watts, by the energy counter's own updates where it moved at least
    twice inside it, else by the power readings; notes which, and the updates used."""
    t_lo, t_hi = burst.pop("t0"), burst.pop("t1")
    updates = sampler.counter_updates(t_lo, t_hi)
    watts = sampler.counter_power(t_lo, t_hi)
    burst["power_from"] = "energy counter" if watts is not None else "power readings"
    burst["counter_updates"] = len(updates)
    burst["counter_span_s"] = updates[-1][0] - updates[0][0] if len(updates) > 1 else 0.0
    burst["updates"] = counter_stream(updates, t_lo + sampler.source.lag_s)
    if watts is None:
        watts = sampler.window(t_lo, t_hi).power_w_mean
    burst["power_w"] = watts
    return watts


def energy_figures(bursts: list[dict[str, Any]], sampler: Sampler
                    ) -> tuple[float | None, dict[str, Any]]:
    """(energy per call, the record of the bursts). Energy per call is the median over the
    bursts; beside it, each burst's figure, their spread, and the board's state when the
    measurement began and just before the first burst: the same kernel's energy per call
    moved ~10% with that state on an H200 (docs/site.md, 'Energy per call')."""
    start = sampler.reading_at(float("-inf"))
    before = sampler.reading_at(bursts[0]["t0"])
    per_call = []
    for b in bursts:
        watts = _burst_power(b, sampler)
        per_call.append(watts * b["device_s"] / b["calls"] if watts is not None else None)
    known = [e for e in per_call if e is not None]
    energy = statistics.median(known) if known else None
    powers = [b["power_w"] for b in bursts if b["power_w"] is not None]
    record = {
        "bursts": len(bursts), "calls": sum(b["calls"] for b in bursts),
        "device_s": sum(b["device_s"] for b in bursts),
        "span_s": sum(b["span_s"] for b in bursts),
        "power_w": statistics.median(powers) if powers else None,
        "power_from": bursts[0]["power_from"],
        "counter_updates": sum(b["counter_updates"] for b in bursts),
        "energy_per_call_j": per_call,
        "spread": (max(known) - min(known)) / energy if len(known) > 1 and energy else None,
        "temperature_c_start": start.temperature_c if start else None,
        "temperature_c_before": before.temperature_c if before else None,
        "power_w_before": before.power_w if before else None,
        "per_burst": bursts,
    }
    return energy, record

