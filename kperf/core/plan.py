"""The settings of one measurement (``kperf.core.timing.measure``): trials, reps, graph
replay, warm-up, holds, energy bursts and adaptive trials, each default with what it
rests on."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Plan:
    trials: int = 10  # samples of one measurement (an asv sample each; a gate block: fewer)
    # ... when the warm-up ended at the power cap (0: ``trials``). There the power
    # controller swings the clock in a cycle of ~0.5-1 s, so a trial of 100 ms reads one
    # phase of it and trials spread 1-3% (H200, 2026-12-01, docs/journal/2026-12-01.md "Late
    # evening"): more trials cover whole cycles.
    trials_at_cap: int = 0
    min_trial_s: float = 0.1  # NVML refreshes every ~100 ms: shorter windows hold stale clocks
    min_reps: int = 10
    max_reps: int = 2000
    graph_below_s: float = 20e-6  # calls shorter than this are timed by graph replay
    graph_rep_s: float = 1e-3  # target device time of one graph replay
    max_graph_calls: int = 500  # large graphs are fragile on ROCm (tritonbench#1034)
    flush_l2: bool = True
    # Flush by reading the buffer instead of writing it: a write leaves the cache full of
    # dirty lines that the timed call writes back as it evicts them. On an H200
    # (GPU-38de9528, 2026-12-04) a 70 us RMSNorm read 65.8 us that way against 70.6 us, and its
    # blocks scattered no less (docs/journal/2026-12-04.md, "What moves a RMSNorm block");
    # an experiment's arm, not the default (every history figure is by writing).
    flush_by_reading: bool = False
    # No warm-up ends before the board's power reading (NVML's: a ~1 s average) covers the
    # kernel's own load: until then neither the power rules below nor the clock can tell
    # whether it will reach the cap. With 0.3 s, 56 of 253 warm-ups of one H200 session
    # (2026-12-02, docs/journal/2026-12-02.md "Morning of 2026-12-02") ended under the cap within 1
    # s and their trials then reached it (14 capped GEMMs read 1.7% fast, median); 1 s
    # would have cost those records 0.14 s a measurement.
    warmup_min_s: float = 1.0
    # ... unless the board draws under cap_near_fraction of its limit by the energy
    # counter (the energy used, no average behind it) and by the averaged reading alike:
    # then the warm-up may end after this long, once its times and clocks agree. Such a
    # kernel cannot be held down by the cap, so neither the power window nor the
    # averaged reading's settling concerns it. A row-op case warmed up 1.40-1.43 s
    # (median, H200, 2026-12-03, docs/journal/2026-12-03.md "Morning of 2026-12-03"),
    # most of it that settling. 0: off.
    cool_warmup_min_s: float = 0.3
    # 252 of 253 warm-ups of an H200 session (0.3 s minimum) settled, in 1.63 s (median;
    # p90 1.83 s, longest 3.77 s; 2026-12-02, docs/journal/2026-12-02.md "Morning of 2026-12-02")
    warmup_max_s: float = 5.0
    settle_trials: int = 3  # consecutive warm-up trials that must agree
    settle_tol: float = 0.01  # relative spread of those trials (time and clock)
    # ... and of their board power: NVML's is a ~1 s average, and a power-capped kernel's
    # clock dips once that average reaches the cap, ~1 s after a change of load
    # (docs/journal/2026-12-01.md, "Warm-up at the power cap")
    settle_power_tol: float = 0.03
    # Near the board's power limit the clock is cut only once the power controller has
    # seen a full averaging window of the load: after a gap of half a second a kernel at
    # the cap ran ~0.8 s at 1965 MHz, its power reading flat below the cap, before its
    # clock fell to ~1400 MHz (H200, 2026-12-01, docs/journal/2026-12-01.md "Warm-up at the power
    # cap"). So a warm-up whose board power reaches cap_near_fraction of the limit runs at least
    # power_window_s, and one that reaches cap_fraction runs cap_settle_s past that. The
    # first reading at the cap comes right after the controller's first deep dip; from
    # there the clock cycles about a steady level. Over 93 capped GEMM warm-ups (H200,
    # 2026-12-02, docs/journal/2026-12-02.md "Capped warm-up"), stopping 0.5 s past it instead of 1
    # s moved the median of the next ten trials by 0.47% (median; signed mean -0.01%), less
    # than two runs of the same case differ (0.63%), and saved 0.98 s a capped case.
    cap_near_fraction: float = 0.85
    cap_fraction: float = 0.95
    power_window_s: float = 1.0
    cap_settle_s: float = 0.5
    estimate_calls: int = 5
    # A hold the host queues a batch behind (the estimate's reps, reps without a flush,
    # the energy burst), so launch latency does not leak into its first intervals
    lead_hold_s: float = 1e-3
    # The estimate chooses how a case is timed (graph replay under ``graph_below_s``), so
    # one the host outlasted its hold in is taken again behind a longer one (twice the
    # last, or ``host_margin`` times the host's time to queue the reps), up to this many
    # times and this long. A 10.8 us LayerNorm whose host took 171 us a rep (5 reps, 1 ms
    # of hold) read 192 us, was timed by events at 15.9 us instead of graph replay at
    # 10.8 us, and stepped x1.467 between two runs of one commit (H200
    # vm-nvidia-h200-eb9ed144, 2026-12-04, docs/journal/2026-12-04.md "Midday of
    # 2026-12-04").
    estimate_retakes: int = 3
    max_lead_hold_s: float = 20e-3
    # A trial's worth of reps that ends with fewer reps still queued than this gets a hold
    # in every rep. The host either keeps ahead, up to the driver's queue (200-256 reps
    # on an H200), or falls behind (about one): of 77 measurements by events without a
    # hold on an H200, none ended a trial fewer than 79 reps ahead (2026-12-02,
    # docs/journal/2026-12-02.md "A hold given where none was needed"). 0 turns holds off.
    host_ahead_reps: float = 8.0
    host_margin: float = 1.5  # a hold: this times the host's time to queue a rep
    max_rep_hold_s: float = 2e-3
    # A hold before every flushed rep's start event however far ahead the host is (0:
    # none). A 70 us RMSNorm's level moves with the hold: TileLang's read 70.53 us unheld,
    # 69.90 / 69.78 / 69.56 us behind 10 / 40 / 150 us (H200 GPU-fd64c0f9, 2026-12-04,
    # docs/journal/2026-12-04.md "Late morning of 2026-12-04"), and whether a block is
    # held otherwise follows how fast its host queues reps, so a case near that edge flips.
    # The gate's bandwidth class sets 150 us (thresholds.json); a floor shorter than the
    # host needs is worse than none (below). The history's default is none: its hosts keep
    # ahead in every events-mode case but the decode GEMMs.
    rep_hold_min_s: float = 0.0
    # A trial that ends with the host behind (as ``host_ahead_reps`` says) and gets a longer
    # hold from it is taken again, at most this many times a measurement. A hold shorter
    # than the host needs lets it fall behind in some trials and not others: with a 10 us
    # or 40 us floor, 7 of 24 Triton RMSNorm blocks held trials of up to 114 us among ones
    # of 69.7 us and the arms' blocks spread 5-9% (H200 GPU-fd64c0f9, 2026-12-04,
    # docs/journal/2026-12-04.md "Late morning of 2026-12-04").
    max_trial_retakes: int = 2
    # Energy per call: after the trials, calls back to back (no flush; graph replay in
    # graph mode) for this long; their mean power, from the energy counter's updates,
    # times their device time per call (0 turns it off).
    energy_s: float = 0.4
    # ... this many bursts back to back; the figure is the median of their energies per
    # call and the record keeps each, so their spread shows. A burst without flushes
    # draws more than the trials: near the power limit the first one overshoots it and
    # the power controller pulls the next ones down (e.g. 746, 688, 664 W), so one burst
    # reads wherever that response happens to be. The middle of three sits at the same
    # place of it run after run: the A/A spread of energy per call fell from 2.24% to
    # 0.62% (bandwidth, median), 5.20% to 2.78% (compute), 5.57% to 2.74% (decode);
    # H200s, 2026-12-03, docs/journal/2026-12-03.md "Evening of 2026-12-03". Cost: 0.8 s
    # a timed case more than one burst.
    energy_bursts: int = 3
    # Adaptive trials (0 turns them off: every measurement takes ``trials``). After each
    # trial from ``min_trials`` on, sampling stops once the 95% interval of the trials'
    # median is within ``stop_rel_ci`` of it (kperf/core/trials.py); ``trials`` is
    # the most it takes. Not at the power cap: there trials follow the power controller's
    # ~1 s clock cycle, so a few of them agree within one phase of it and their interval
    # says nothing of the others (docs/journal/2026-12-01.md "Late evening of 2026-12-01").
    stop_rel_ci: float = 0.0
    min_trials: int = 3

    def with_overrides(self, **kw: Any) -> Plan:
        return Plan(**{**asdict(self), **kw})

