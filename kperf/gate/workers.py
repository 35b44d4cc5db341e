"""The gate's measurement workers: a pair per lane (base and head) and generation, the
next pair started ahead while this one measures, every one stopped when the run ends.

Both sides (built by kperf/gate/plan.py) live in two workers at once, measured next to
each other in every round by the working tree's ``harness`` and ``benchmarks``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from kperf import project
from kperf.core.worker import (
    RemoteError,
    RemoteSkip,
    WorkerClient,
    WorkerError,
    WorkerSpec,
    device_key,
)
from kperf.gate.jobs import join
from kperf.gate.model import SIDES
from kperf.gate.plan import GatePlan, Lane, stack_path
from kperf.specs import CaseSpec

PREPARE_TIMEOUT_S = 900.0
# A worker started ahead of its turn waits a round (~1-2 min) before its first measurement;
# the gate stops its workers itself, so they must not time out waiting.
GATE_IDLE_S = 900.0
# What answers a gate worker's requests: kperf's suite (kperf/suites/case.py), or, for a
# simulated GPU, a stand-in ("path/to/file.py:function" or "module:function"; the gate's
# end-to-end tests use one)
HANDLER_ENV = "KPERF_WORKER_HANDLER"


def gate_worker(slot: str, sys_path: Sequence[str], label: str, env: dict[str, str],
                packages: Sequence[str]) -> WorkerClient:
    """A worker for one side on one GPU: that side's code under test (``packages``) first on
    its path, kperf's suite (``kperf.suites.case.handle``) as the instrument."""
    handler = env.get(HANDLER_ENV) or "kperf.suites.case:handle"
    return WorkerClient(WorkerSpec(handler=handler, sys_path=tuple(sys_path),
                                   packages=tuple(packages), device=device_key(env), slot=slot,
                                   label=label), idle_s=GATE_IDLE_S, env=env)


class Pairs:
    """The workers of the current pair (its ``generation``) and of the pair started ahead."""

    def __init__(self, plan: GatePlan, sites: dict[str, Path],
                 make_client: Callable[..., WorkerClient], generation: int):
        self.plan, self.sites, self.make_client = plan, sites, make_client
        self.generation = generation
        # rounds the current pair of workers measured; None: no pair in this process yet
        self.rounds: int | None = None
        # the next pair, started while this one measures: (its generation, its imports)
        self.ahead: tuple[int, Future[float]] | None = None
        self.background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kperf-ahead")
        self.waited_s = 0.0  # blocks waiting for the next pair's imports, this round
        self.static_generations: set[int] = set()  # codegen workers started (``client``)

    def client(self, lane: Lane, side: str, static: bool = False,
               generation: int | None = None) -> WorkerClient:
        if static:  # codegen workers: 0 the static figures' and compiles', then fresh ones
            codegen = generation or 0
            self.static_generations.add(codegen)
            slot = f"gate-{lane.label}-{side}-static" + (f"-g{codegen}" if codegen else "")
        else:
            timed = self.generation if generation is None else generation
            slot = f"gate-{lane.label}-{side}-g{timed}"
        env = dict(os.environ, **lane.env)
        cache = self.plan.repo / ".cache"  # shared with asv's runs (kperf/history/asvrun.py)
        env.setdefault("TRITON_CACHE_DIR", str(cache / "triton"))
        env.setdefault("TILELANG_CACHE_DIR", str(cache / "tilelang"))
        env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
        if static:
            env["KPERF_DEVICE"] = "static"
            # the static figures' cache (kperf/suites/static.py): the run's own, not /tmp's
            env.setdefault("ASV_ENV_DIR", str(self.plan.pr_dir / "codegen-cache"))
        proj = project.of(self.plan.repo)
        env.update(project.environment(proj))
        ops = [] if proj.ops_measured else [proj.import_path()]  # a tracker's own ops
        return self.make_client(slot=slot, sys_path=[str(self.sites[side]),
                                                      *self.plan.stack_site(side), *ops,
                                                      *stack_path(self.plan.repo)],
                                label=f"{side} {getattr(self.plan, side)[:8]}", env=env,
                                packages=proj.code_packages())

    def retire(self, spare_too: bool = True) -> None:
        """Stop this generation's workers (the GPU's memory back; fresh ones next), and
        the next generation's if they were started ahead and are not to be used. At the
        end of the run (``spare_too``) the static figures' workers too, which would
        otherwise wait out their idle time (``GATE_IDLE_S``)."""
        generations = [self.generation]
        spare, self.ahead = (self.ahead, None) if spare_too else (None, self.ahead)
        if spare is not None:
            generations.append(spare[0])
            spare[1].cancel()
        for generation in generations:
            for lane in self.plan.lanes:
                for side in SIDES:
                    self.client(lane, side, generation=generation).shutdown()
        if spare_too:
            for lane in self.plan.lanes:
                for side in SIDES:
                    for codegen in sorted(self.static_generations):
                        self.client(lane, side, static=True, generation=codegen).shutdown()
        if spare is not None:  # its request ends once its workers are gone
            with contextlib.suppress(Exception):
                spare[1].result()

    def due(self, rounds_per_generation: int) -> bool:
        """Whether a fresh pair takes over before the next round: this pair measured its
        rounds, or this process has none yet (a resumed run: the old pair's processes are
        gone, and a new pair is a new generation, with an offset of its own)."""
        return self.rounds is None or self.rounds >= rounds_per_generation

    def start_ahead(self, specs: dict[str, list[CaseSpec]]) -> None:
        """Start the next pair of workers now, in the background, and have them import
        what their cases need (torch, the compilers, the ops; ``specs`` per lane) without
        touching the GPU: the new pair then costs only its GPU context and its cases'
        preparation when its turn comes (docs/gate.md, "A fresh pair of workers every
        round")."""
        generation = self.generation + 1

        def job() -> float:  # one worker at a time: one process's host load, as measured
            start = time.monotonic()
            for lane in self.plan.lanes:
                for side in SIDES:
                    self.client(lane, side, generation=generation).request(
                        {"op": "warm", "specs": specs.get(lane.label, [])}, PREPARE_TIMEOUT_S)
            return time.monotonic() - start

        self.ahead = (generation, self.background.submit(job))

    def wait_for_ahead(self) -> None:
        """Let the next pair finish its imports before a block that the host's load can
        move. A pair importing ahead made a 70 us RMSNorm's block 7.7% slow on an H200
        (docs/journal/2026-12-01.md, 2026-12-01), most likely because its launches fell behind the
        GPU. Kernels at the power cap run 0.6-2 ms a call and keep the queue full; only their
        blocks overlap the imports (the most power-hungry cases go first in a round)."""
        if self.ahead is not None and not self.ahead[1].done():
            start = time.monotonic()
            with contextlib.suppress(RemoteError, RemoteSkip, WorkerError):
                join([self.ahead[1]])
            self.waited_s += time.monotonic() - start

    def replace(self, generation: int) -> str:
        """Retire the pair that measured so far; ``generation`` takes over (the pair
        started ahead, if it is that one). Says how the new pair was started."""
        how = self._take_ahead(generation)
        self.retire(spare_too=False)
        self.generation, self.rounds = generation, 0
        return how

    def _take_ahead(self, generation: int) -> str:
        """Wait for the pair started ahead (if it is this generation); says how it went."""
        if self.ahead is None or self.ahead[0] != generation:
            return "started now"
        self.wait_for_ahead()  # a round shorter than the imports
        _, future = self.ahead
        self.ahead, waited, self.waited_s = None, self.waited_s, 0.0
        try:
            seconds = future.result()
        except (RemoteError, RemoteSkip, WorkerError) as err:
            return f"start ahead failed, started now ({str(err).splitlines()[0][:200]})"
        return (f"started ahead ({seconds:.1f} s of imports, {seconds - min(waited, seconds):.1f}"
                f" s of it under blocks at the power cap)")
