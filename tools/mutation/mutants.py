"""The mutants ``python -m tools.mutation.run`` makes of the gate's decision code: each one
edit (one snippet of one file, replaced) that a test must notice, and the tests that should.

The decision code: the verdict model (kperf/gate/model.py, kperf/gate/look.py), its statistics
(kperf/core/stats.py), the looks and the re-measure (kperf/gate/sequential.py), the class
choice at the power cap and the thresholds' checks (kperf/gate/config.py, kperf/config.py),
the exit codes (kperf/gate/errors.py, sequential.py, cli.py), the warm-up's early end far
from the cap (kperf/core/warmup.py), the hold floor (kperf/core/reps.py) and the trials taken
again (kperf/core/timing.py), the digests that decide
what is measured at all (kperf/gate/plan.py, kperf/suites/timed.py), and the history's
threshold rule (kperf/site/spreads.py); and, from tools/mutation/mutants_codegen.py, the code
on generated code and trust (code-object figures, the gfx942 toolchain in the digests, the
worker's trust, the codegen verdicts, the site's step causes and codegen summaries, other
processes on the GPU, the A/A data of the history thresholds). docs/reliability.md has the
last run's table.
"""

from __future__ import annotations

from dataclasses import dataclass

from tools.mutation import mutants_codegen


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    original: str  # must occur exactly once in ``path``
    mutated: str
    tests: tuple[str, ...]  # pytest node ids or files
    breaks: str  # what the edit would break, in words


GATE = ("tests/test_gate_verdicts.py", "tests/test_gate_sequence.py", "tests/test_gate_run.py",
        "tests/test_gate_disturbed.py", "tests/test_gate_config.py",
        "tests/test_gate_report.py")  # the gate's model tests, all of them
EXITS = "tests/test_gate_exits.py"
ORDER = "tests/test_gate_order.py"
LOOKS = "tests/test_gate_simulation.py::test_the_looks_hold_alpha_through_the_real_spending_" \
        "and_correction"
DRIFT = "tests/test_compat_drift.py"
HISTORY = "tests/test_history_thresholds.py"
AADATA = "tests/test_history_aa.py"
BASELINE = "tests/test_time_suite.py::test_the_baseline_key_follows_its_code_not_the_kernels_" \
           "under_test"
KERNELS = "tests/test_kernel_policy.py"
PLACED = "tests/test_history_placement.py"


def _m(name: str, path: str, original: str, mutated: str, tests: tuple[str, ...],
       breaks: str) -> Mutant:
    return Mutant(name, path, original, mutated, tests, breaks)


COSTS = "tests/test_gate_costs.py"
MODEL = "kperf/gate/model.py"
LOOK = "kperf/gate/look.py"
STATS = "kperf/core/stats.py"
SEQ = "kperf/gate/sequential.py"
CONF = "kperf/gate/config.py"
CLI = "kperf/gate/cli.py"
DIGESTS = "kperf/suites/digests.py"
SUITES = "kperf/suites/timed.py"

MUTANTS: tuple[Mutant, ...] = (
    # ---- the class at the power cap (issue 27's first survivor)
    _m("cap-class-only-when-all-capped", CONF, "return capped_share > 0.5",
       "return capped_share >= 1.0",
       GATE, "a case mostly at the power cap judged by its rule's tighter class"),
    _m("cap-class-even-if-looser", CONF,
       "\n                or capped.min_ratio <= klass.min_ratio)", ")", GATE,
       "a wider class (decode) narrowed to the cap class"),
    _m("cap-class-for-exact-figures", CONF, "if (capped is None or klass.exact or",
       "if (capped is None or", GATE, "a static figure judged with a tolerance"),
    _m("power-capped-by-power-alone", MODEL,
       "return self.at_limit(th) if self.throttle_bits is None else self._cap_bit(th)",
       "return self.at_limit(th)", GATE,
       "power near the limit without the cap bit counted as capped"),
    # ---- what a block and a round are
    _m("capped-block-median-not-mean", MODEL,
       "return (statistics.fmean if self.at_cap else statistics.median)(self.samples)",
       "return statistics.median(self.samples)", GATE,
       "at the cap a block's phase-dependent median instead of the user's time average"),
    _m("first-try-of-a-round-again", MODEL, 'out.append((whole[-1]["base"], whole[-1]["head"]))',
       'out.append((whole[0]["base"], whole[0]["head"]))', GATE,
       "a disturbed round's first try used instead of its second"),
    _m("min-rounds-ignored", LOOK, "    if len(pairs) < th.sequential.min_rounds:\n",
       "    if False:\n", GATE, "a verdict before min_rounds rounds"),
    # ---- clocks: whose is the gap
    _m("environment-bits-ignored", MODEL, "    if env_bits:\n", "    if False:\n", GATE,
       "heat or a hardware slowdown read as the code's own clock drop"),
    _m("one-side-at-the-limit-enough", MODEL, "if min(limited) < th.at_limit_share:",
       "if max(limited) < th.at_limit_share:", GATE,
       "the code blamed for a clock gap with one side below the power limit"),
    _m("clock-following-the-round-is-the-codes", MODEL,
       "or same_sign < th.side_share:", "or same_sign < 0:", GATE,
       "a clock that follows the round, not the side, taken as the code's"),
    _m("cycles-p-value-ignored", LOOK, "    if rounds.cycles:\n", "    if False:\n", GATE,
       "a change claimed in time alone where the environment moved the clock"),
    # ---- the order of the sides at the power cap
    _m("order-effect-kept", LOOK,
       "half = (statistics.fmean(first) - statistics.fmean(second)) / 2.0", "half = 0.0",
       (ORDER,), "an at-cap case's rounds keep the first block's handicap as noise"),
    _m("order-taken-out-off-the-cap", LOOK, "if not mostly_capped(data.capped_share(th)):",
       "if False:", (ORDER,),
       "a case off the cap pays a degree of freedom for an effect it does not have"),
    _m("order-fitted-for-free", STATS, "df = float(max(k - 1 - fitted, 1))",
       "df = float(max(k - 1, 1))", (ORDER,),
       "the order's fitted effect not paid for in the pairs' degrees of freedom"),
    _m("two-pairs-spread-as-reference", STATS,
       "if tau2_dl > tau_floor ** 2 and (k - 1 - fitted >= 2 or tau_floor == 0.0):",
       "if tau2_dl > tau_floor ** 2:", ("tests/test_stats.py",),
       "two pairs that agree on a 2x change judged by t(1): a confirmed compile undecided"),
    _m("order-from-one-round", LOOK, "if min(len(first), len(second)) < ORDER_MIN_ROUNDS:",
       "if not first or not second:", (ORDER,),
       "an order effect fitted from one round of an order, its rounds then read exactly"),
    _m("time-alone-where-cycles-disagree", LOOK,
       'if time_label == cycle_label and time_label != "NOISY":',
       'if time_label != "NOISY":', GATE, "time and cycles disagreeing, time wins"),
    # ---- error control (issue 27: the simulation must guard the real code)
    _m("no-alpha-spending", LOOK, "alpha_k = stats.spent(th.alpha, look, looks, power)",
       "alpha_k = th.alpha", (LOOKS,), "every look spends the whole alpha"),
    _m("no-correction-over-cases", LOOK,
       "q_values = stats.adjust([t.p_case for t in tested], th.correction)",
       "q_values = [t.p_case for t in tested]", (LOOKS,), "no Benjamini-Hochberg over cases"),
    _m("bh-not-scaled", STATS, "scaled = p[order] * m / np.arange(1, m + 1)",
       "scaled = p[order]", (LOOKS,), "Benjamini-Hochberg that adjusts nothing"),
    _m("spending-spends-all", STATS,
       "return total * ((look / looks) ** power - ((look - 1) / looks) ** power)",
       "return total", (LOOKS,), "each look given the whole alpha by stats.spent"),
    _m("every-look-the-last-share", SEQ, "look = min(upto - seq.min_rounds + 1, seq.looks)",
       "look = seq.looks", GATE, "a replay giving early looks the largest share"),
    # ---- one look's label
    _m("slow-below-the-threshold", STATS, "if q_value < alpha and change.ratio >= up:",
       "if q_value < alpha and change.ratio > 1.0:", GATE,
       "a significant change smaller than the class's min_ratio called SLOW"),
    _m("same-with-half-the-interval-inside", STATS,
       "if 1.0 / (1.0 + band) <= same.ci_low and same.ci_high <= 1.0 + band:",
       "if 1.0 / (1.0 + band) <= same.ci_low or same.ci_high <= 1.0 + band:", GATE,
       "SAME with an interval reaching past the band"),
    _m("same-at-beta-not-two-sided", LOOK,
       "change, same = t.compare(time, CHANGE_LEVEL), t.compare(time, 1.0 - 2.0 * beta_k)",
       "change, same = t.compare(time, CHANGE_LEVEL), t.compare(time, 0.5)", GATE,
       "SAME's interval far narrower than its error rate allows"),
    _m("pair-offsets-ignored", LOOK,
       "return stats.random_effects(d, level, klass.sd_floor, klass.pair_offset_sd, fitted)",
       "return stats.random_effects(d, level, klass.sd_floor, 0.0, fitted)", GATE,
       "one pair of workers claiming more precision than pairs have"),
    _m("static-figure-direction", LOOK,
       'raw = "SAME" if h == b else ("SLOW" if h > b else "FAST")',
       'raw = "SAME" if h == b else ("FAST" if h > b else "SLOW")', GATE,
       "a static figure's growth called FAST"),
    _m("higher-is-better-ignored", LOOK, "    if not higher_is_better:\n        return label",
       "    if True:\n        return label", GATE, "occupancy's drop called FAST"),
    # ---- failures and skips
    _m("failure-at-base-is-broken", LOOK, 'v.broke = why.startswith("failed at head")',
       'v.broke = why.startswith("failed at")', (EXITS,),
       "the PR blamed (exit 2) for a case that fails at base"),
    _m("failure-at-head-not-broken", LOOK, 'v.broke = why.startswith("failed at head")',
       "v.broke = False", GATE, "a kernel that breaks at head not reported broken"),
    _m("skipped-both-sides-reported", LOOK, 'v.reason, v.skipped = "skipped on both sides", True',
       'v.reason, v.skipped = "skipped on both sides", False', (EXITS,),
       "a case neither commit has judged (INCONCLUSIVE, exit 3)"),
    # ---- the re-measure by fresh workers
    _m("no-re-measure", SEQ, "            v = confirm(v, data, th)\n", "            pass\n",
       GATE, "SLOW/FAST stand without a fresh pair reproducing them"),
    _m("not-re-measured-yet-stands", SEQ,
       '    if not pairs:\n        v.verdict = "INCONCLUSIVE"\n', "    if not pairs:\n", GATE,
       "a candidate stands before its re-measure"),
    _m("re-measure-one-way-enough", SEQ, 'raw = ("SLOW" if all(r >= up for r in moved) else',
       'raw = ("SLOW" if any(r >= up for r in moved) else', GATE,
       "a re-measure confirming in time but not in cycles"),
    _m("pooled-pairs-not-checked", SEQ, "    if p_together >= th.alpha:\n",
       "    if False:\n", GATE, "pairs that disagree too much still confirm"),
    # ---- exit codes
    _m("broken-read-as-regression", SEQ, "        return EXIT_BROKEN\n",
       "        return EXIT_REGRESSION\n", GATE, "a broken benchmark reported as SLOW"),
    _m("inconclusive-passes", SEQ, "        return EXIT_INCONCLUSIVE\n",
       "        return EXIT_PASS\n", GATE, "an undecided case passes"),
    _m("regression-inconclusive", SEQ, "        return EXIT_REGRESSION\n",
       "        return EXIT_INCONCLUSIVE\n", GATE, "a SLOW case only warns"),
    _m("crash-exits-3", CLI,
       "code = err.exit_code if isinstance(err, GateError) else EXIT_GATE_ERROR",
       "code = err.exit_code if isinstance(err, GateError) else 3", (EXITS,),
       "a crash of the gate read as inconclusive (CI passes it)"),
    _m("nothing-judged-passes", CLI, "    if not verdicts:\n", "    if False:\n", (EXITS,),
       "a run that judged no case passes"),
    _m("no-blocks-inconclusive", CLI, "    if planned and not path.exists():\n",
       "    if False:\n", (EXITS,), "a PR folder without blocks.jsonl judged inconclusive"),
    _m("no-state-inconclusive", CLI, '"--no-run or --resume first)")',
       '"--no-run or --resume first)", 3)', (EXITS,),
       "an empty PR folder judged inconclusive"),
    _m("usage-error-exits-2", CLI, "self.exit(EXIT_GATE_ERROR, ", "self.exit(2, ", (EXITS,),
       'a bad command line read as "a benchmark broke"'),
    # ---- configuration
    _m("max-below-min-rounds-accepted", CONF, "if seq.max_rounds < seq.min_rounds:",
       "if False:", GATE, "a thresholds file with no look at all"),
    _m("float-counts-as-integer", "kperf/config.py",
       "return isinstance(instance, int) and not isinstance(instance, bool)",
       "return isinstance(instance, int | float) and not isinstance(instance, bool)",
       ("tests/test_config.py",), "min_rounds: 3.0 accepted, a TypeError later"),
    _m("placed-outputs-without-an-arena", CONF,
       "if klass.placed_outputs and not klass.placement_arena_gb:", "if False:", GATE,
       "a class asks for placed outputs with no arena: every block of it fails in a worker"),
    _m("placed-outputs-not-asked-for", "kperf/gate/measure.py",
       '**({"placed_outputs": True}', '**({"placed_outputs": False}', GATE,
       "the bandwidth class's blocks measured with the op's output where the allocator "
       "puts it (0.5% a block)"),
    # ---- the measurement's regime: the warm-up's early end, the hold floor
    _m("gapped-burst-kept", "kperf/core/energy.py",
       "and runner.device.supports_graphs and per_call_s > BURST_GAP_RATIO * call_s)",
       "and False)", ("tests/test_host_hold.py",),
       "a burst the host left idle gaps in counted as the calls' energy (Triton RMSNorm "
       "1.5-1.6x its call, outputs placed)"),
    _m("gapped-burst-not-graphed", "kperf/core/reps.py",
       "if not (self.rep_hold_s or self.graph_bursts) or not self.device.supports_graphs:",
       "if not self.rep_hold_s or not self.device.supports_graphs:", ("tests/test_host_hold.py",),
       "the burst after a gapped one launched call by call again, its gaps kept"),
    _m("hold-floor-ignored", "kperf/core/reps.py",
       "return max(self.rep_hold_s, self.plan.rep_hold_min_s)", "return self.rep_hold_s",
       ("tests/test_host_hold.py",),
       "a block's reps held or not by its host's pace despite a floor (held RMSNorm blocks "
       "read 0.5-0.8% faster, H200 GPU-38de9528, 2026-12-04)"),
    _m("hold-shrinks", "kperf/core/reps.py",
       "self.rep_hold_s = max(self.rep_hold_s,\n", "self.rep_hold_s = max(0.0,\n",
       ("tests/test_host_hold.py",),
       "a trial held less than the ones before it in the same measurement"),
    _m("no-trial-retaken", "kperf/core/timing.py",
       "if out.retaken < plan.max_trial_retakes and runner.raise_hold_if_behind():",
       "if False:", ("tests/test_host_hold.py",),
       "a trial the host fell behind in kept: its intervals hold launch latency (trials of "
       "up to 114 us among 69.7 us ones, H200 GPU-fd64c0f9, 2026-12-04)"),
    _m("trial-retakes-unbounded", "kperf/core/timing.py",
       "if out.retaken < plan.max_trial_retakes and runner.raise_hold_if_behind():",
       "if runner.raise_hold_if_behind():", ("tests/test_host_hold.py",),
       "a host that never keeps up retakes trial after trial"),
    _m("estimate-not-retaken", "kperf/core/timing.py",
       "if not runner.outlasted_lead_hold() or hold_s >= plan.max_lead_hold_s:",
       "if True:", ("tests/test_host_hold.py",),
       "an estimate read from the host's launches chooses events for a 10.8 us kernel: "
       "x1.467 between two runs of one commit (H200 vm-nvidia-h200-eb9ed144, 2026-12-04)"),
    _m("estimate-host-never-behind", "kperf/core/reps.py",
       "return self.reps_queued is not None and self.reps_queued < 0.9 * self.last_reps",
       "return False", ("tests/test_host_hold.py",),
       "the same: the estimate's host is never seen to outlast its hold"),
    _m("timing-methods-not-compared", "kperf/gate/model.py",
       "return (base, head) if base != head or base == \"mixed\" else None", "return None",
       ("tests/test_gate_report.py",),
       "a case timed by graph replay at base and events at head reads as the kernel's "
       "change alone"),
    _m("class-hold-floor-not-asked-for", "kperf/gate/measure.py",
       '**({"rep_hold_min_s": klass.rep_hold_min_s} if klass.rep_hold_min_s else {})',
       "**{}", GATE,
       "the bandwidth class's blocks held or not by their host's pace (TileLang RMSNorm "
       "70.53 us unheld, 69.56 us held, H200 GPU-fd64c0f9, 2026-12-04)"),
    _m("cool-by-either-reading", "kperf/core/warmup.py",
       "return max(counter_w, averaged_w) < plan.cap_near_fraction * limit_w",
       "return min(counter_w, averaged_w) < plan.cap_near_fraction * limit_w",
       ("tests/test_warmup_cool.py",),
       "a kernel heading for the cap (its averaged reading still low) stops warming up early"),
    # ---- digests: what is measured at all
    _m("op-digest-counts-other-ops", "kperf/ops/files.py",
       "    own = [p for p in package_files(root) if not any(o in p.parents for o in others)]",
       "    own = package_files(root)", (*GATE, DRIFT),
       "an op measured because another op changed (or SAME unmeasured wrongly)"),
    _m("kernel-digest-counts-the-other-backend", "kperf/gate/plan.py",
       "skip = [p for p in folder.glob(\"*.py\") if others and p.name.startswith(others)]",
       "skip = []", ("tests/test_codegen_runner.py", "tests/test_teams.py"),
       "a kernel measured again because the op's other backend changed (a TileLang edit "
       "re-times Triton's compile)"),
    _m("op-digest-ignores-shared-code", "kperf/ops/files.py",
       "if not any(o in p.parents for o in others)]",
       "if not any(o in p.parents for o in others) and p.parent != root]", (*GATE, DRIFT),
       "a change of the ops package's shared modules leaving the op SAME unmeasured"),
    _m("baseline-ignores-case-runner", DIGESTS,
       '    digest_files(digest, Path(__file__).parent, [Path(__file__).with_name("case.py")])\n',
       "", (DRIFT,), "the torch baseline not timed again after kperf/suites/case.py changed"),
    _m("baseline-ignores-torch", DIGESTS, '    _hash_versions(digest, ("torch",))\n', "",
       (DRIFT,), "the torch baseline not timed again under another torch"),
    _m("baseline-counts-kernels-under-test", DIGESTS,
       "    if backend is None:\n        return set()\n    others =",
       "    return set()\n    others =", (BASELINE, KERNELS),
       "the baseline timed again at every TileLang or Triton edit, a kernel at every edit of "
       "its op's other backend"),
    _m("baseline-ignores-plan", DIGESTS,
       "    digest.update(json.dumps(plan, sort_keys=True).encode())\n    return digest",
       "    return digest", (BASELINE,),
       "the baseline not timed again under another measuring plan"),
    _m("kernels-changed-by-default", DIGESTS, "KERNEL_POLICY: \"every\"}",
       "KERNEL_POLICY: \"changed\"}", (KERNELS,),
       "the nightly history quietly measuring only the changed kernels"),
    _m("kernel-digest-ignores-plan", DIGESTS, "    digest.update(plan_json.encode())\n", "",
       (KERNELS,), "a kernel not timed again under another plan or class precision"),
    _m("kernel-skip-on-rerun", DIGESTS,
       'if not same or any(r.get("commit") == commit for r in same):', "if not same:",
       (KERNELS,), "a rerun of a commit blanked instead of measured again"),
    _m("source-digest-ignores-compilers", DIGESTS,
       "    _hash_versions(digest, COMPILERS)\n    _hash_nvcc(digest)\n    for arch in",
       "    _hash_nvcc(digest)\n    for arch in", (DRIFT,),
       "static figures and compile times reused across compiler versions"),
    _m("kernel-digest-ignores-compilers", DIGESTS,
       "    _hash_versions(digest, COMPILERS)\n    _hash_nvcc(digest)  # TileLang",
       "    _hash_nvcc(digest)  # TileLang", (DRIFT,),
       "a kernel not timed again under another Triton or TileLang (--kernels changed)"),
    _m("compile-digest-ignores-timing-code", DIGESTS,
       "    for name in COMPILE_TIMING_CODE:\n"
       "        digest.update(Path(__file__).with_name(name).read_bytes())\n",
       "", (DRIFT,),
       "compile times not timed again after the timing code changed"),
    # ---- where the history's buffers lie
    _m("history-unplaced", SUITES, "        return {**placement_plan(name), **plan}",
       "        return plan", (PLACED,),
       "the history's bandwidth cases timed where one process's allocations put them "
       "(1.65% between runs for a 7 us LayerNorm, 0.05% placed)"),
    _m("history-places-every-class", SUITES,
       'if not klass or not klass.get("level_by_placement"):', "if not klass:", (PLACED,),
       "the compute class's history measured over the gate's 4 padded copies, its series "
       "restarted for nothing"),
    # ---- the history's thresholds (what asv publish flags)
    _m("history-tail-ignored", "kperf/site/spreads.py",
       "self.tail_factor * (spread.tail or 0.0)", "0.0", (HISTORY,),
       "energy per call flagged beyond its median spread, inside its A/As' tails"),
    _m("history-tail-is-the-largest", "kperf/history/aadata.py",
       'return float(raw.get("tail_quantile", 1.0))', "return 1.0", (HISTORY, AADATA),
       "one odd A/A pair of 56 sets its class's threshold (compute time 4.5%, not 3%)"),
    _m("history-quantile-not-interpolated", "kperf/history/aadata.py",
       "v[low] + (at - low) * (v[low + 1] - v[low])", "v[low]", (HISTORY, AADATA),
       "a class's tail read one order statistic low"),
    _m("history-threshold-not-rounded-up", "kperf/site/spreads.py",
       "steps = math.ceil(round(bound / self.step, 9))",
       "steps = math.floor(round(bound / self.step, 9))", (HISTORY,),
       "a threshold rounded below its spread's bound"),
    _m("cost-rule-ignored", LOOK,
       'if klass.slow_only_with_cost and not cost.startswith("costs"):',
       'if False:', (COSTS,),
       "four registers at unchanged occupancy a red check"),
    _m("occupancy-fall-not-a-cost", LOOK,
       'if num(head, "occupancy") < num(base, "occupancy"):',
       'if num(head, "occupancy") < num(base, "occupancy") - 1:', (COSTS,),
       "registers that cost a wave read as 'changed, no cost'"),
    _m("spills-not-a-cost", LOOK, "if num(head, key) > num(base, key)]",
       "if num(head, key) > num(base, key) + 8]", (COSTS,),
       "new spills at unchanged occupancy read as 'changed, no cost'"),
    _m("workers-outlive-a-killed-run", "kperf/core/workerproc.py",
       "if owner and not alive(owner):", "if False:", ("tests/test_leftovers.py",),
       "a gate killed with SIGKILL leaves its workers running for their idle time"),
    _m("test-session-ignores-sigterm", "tests/conftest.py",
       "        signal.signal(signal.SIGTERM, _interrupted)", "        pass",
       ("tests/test_session_cleanup.py",),
       "a cancelled CI job's test session leaves its cache folder in /tmp"),
    _m("test-session-keeps-dead-folders", "tests/conftest.py",
       "    _sweep_dead_sessions()\n", "", ("tests/test_session_cleanup.py",),
       "every SIGKILLed test session's cache folder stays in /tmp for good"),
    _m("perf-cache-left-behind", "kperf/history/perf.py",
       'with tempfile.TemporaryDirectory(prefix="kperf-perf-cache-") as cache, \\',
       'with __import__("contextlib").nullcontext(tempfile.mkdtemp(\n'
       '            prefix="kperf-perf-cache-")) as cache, \\',
       ("tests/test_perf_tool.py",), "every kperf perf run leaves its compile caches in /tmp"),
    _m("broken-counted-as-inconclusive", "kperf/gate/report.py",
       "sum(v.verdict == k and not v.broke for v in verdicts)",
       "sum(v.verdict == k for v in verdicts)", (EXITS,),
       "a case wrong at head counted twice, once as inconclusive"),
    _m("history-no-cost-step-red", "kperf/site/steps.py",
       'elif not compiled and not (cost := static_cost(*figures)).startswith("costs"):',
       'elif False:', (COSTS,),
       "a register step that costs nothing flagged as the code's regression"),
    _m("processes-outside-a-container-not-counted", "kperf/core/telemetry/processes.py",
       "extra = len(listed) - here", "extra = 0",
       ("tests/test_telemetry_processes.py",),
       "a neighbour outside the GPU job's container never seen"),
    _m("held-back-pairs-also-train", "tools/lab/thresholds_study.py",
       "train = used_pairs([(p, pl) for p, pl in pairs if part[p.series] != k], gate)",
       "train = used_pairs(pairs, gate)", ("tests/test_history_aa.py",),
       "the held-back validation judges pairs by thresholds computed with them"),
    *(Mutant(*row) for row in mutants_codegen.ROWS),
)
