"""The settings of one measurement (``kperf.core.timing.measure``): trials, reps, graph
replay, warm-up, holds, energy bursts and adaptive trials. What each default rests on,
with its measurement: docs/facts.md, "What each default of the timing plan rests on"."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Plan:
    trials: int = 10  # samples of one measurement (an asv sample each; a gate block: fewer)
    # ... when the warm-up ended at the power cap (0: ``trials``): there the clock swings in
    # a ~1 s cycle and a trial reads one phase of it; more trials cover whole cycles
    trials_at_cap: int = 0
    min_trial_s: float = 0.1  # NVML refreshes every ~100 ms: shorter windows hold stale clocks
    min_reps: int = 10
    max_reps: int = 2000
    graph_below_s: float = 20e-6  # calls shorter than this are timed by graph replay
    graph_rep_s: float = 1e-3  # target device time of one graph replay
    max_graph_calls: int = 500  # large graphs are fragile on ROCm (tritonbench#1034)
    flush_l2: bool = True
    # flush by reading the buffer instead of writing it (a write leaves dirty lines the
    # timed call writes back): an experiment's arm; every history figure is by writing
    flush_by_reading: bool = False
    # No warm-up ends before the board's averaged power reading covers the kernel's own
    # load: until then neither the power rules below nor the clock tell whether it will
    # reach the cap ...
    warmup_min_s: float = 1.0
    # ... unless the board draws under cap_near_fraction of its limit by the energy counter
    # and by the averaged reading alike: such a kernel cannot be held down by the cap, so
    # its warm-up may end this soon, once its times and clocks agree (0: off)
    cool_warmup_min_s: float = 0.3
    warmup_max_s: float = 5.0
    settle_trials: int = 3  # consecutive warm-up trials that must agree
    settle_tol: float = 0.01  # relative spread of those trials (time and clock)
    # ... and of their board power: a capped kernel's clock dips once the ~1 s power
    # average reaches the cap
    settle_power_tol: float = 0.03
    # The clock is cut only once the power controller has seen a full window of the load:
    # a warm-up whose power reaches cap_near_fraction of the limit runs at least
    # power_window_s, and one that reaches cap_fraction runs cap_settle_s past that
    cap_near_fraction: float = 0.85
    cap_fraction: float = 0.95
    power_window_s: float = 1.0
    cap_settle_s: float = 0.5
    estimate_calls: int = 5
    # a hold the host queues a batch behind (the estimate's reps, reps without a flush, the
    # energy burst), so launch latency does not leak into its first intervals
    lead_hold_s: float = 1e-3
    # The estimate chooses how a case is timed (graph replay or events), so one the host
    # outlasted its hold in is taken again behind a longer hold (twice the last, or
    # host_margin times the host's time to queue the reps), this many times at most
    estimate_retakes: int = 3
    max_lead_hold_s: float = 20e-3
    # a trial that ends with fewer reps still queued than this gets a hold in every rep
    # (the host keeps ahead up to the driver's queue, or falls behind); 0 turns holds off
    host_ahead_reps: float = 8.0
    host_margin: float = 1.5  # a hold: this times the host's time to queue a rep
    max_rep_hold_s: float = 2e-3
    # a hold before every flushed rep however far ahead the host is (0: none): a level
    # moves with the hold, so the gate's bandwidth class fixes one (thresholds.json)
    rep_hold_min_s: float = 0.0
    # a trial after which the host was behind and gets a longer hold is taken again, at
    # most this many times a measurement (a hold shorter than the host needs flips trials)
    max_trial_retakes: int = 2
    # Energy per call: after the trials, calls back to back (no flush; graph replay in
    # graph mode) for this long; their mean power times their device time per call (0: off)
    energy_s: float = 0.4
    # ... this many bursts; the figure is the median of their energies per call (the first
    # burst near the limit overshoots it and the controller pulls the next ones down)
    energy_bursts: int = 3
    # Adaptive trials (0: off, every measurement takes ``trials``): from ``min_trials`` on,
    # sampling stops once the 95% interval of the trials' median is within ``stop_rel_ci``
    # of it (kperf/core/trials.py). Not at the power cap, whose clock cycle a few trials
    # within one phase would not see.
    stop_rel_ci: float = 0.0
    min_trials: int = 3

    def with_overrides(self, **kw: Any) -> Plan:
        return Plan(**{**asdict(self), **kw})
