"""thresholds.json: validated against kperf/schemas/thresholds.json, then made typed.

Every error names the file and the field (``kperf.config``); the few rules a schema
cannot say (a rule naming an unknown class, a bad regex, max_rounds below min_rounds)
are checked here the same way. Bit masks are hex strings and are parsed by
``parse_bits``, the one parser the gate and the telemetry page share.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kperf.config import ConfigError, load_json
from kperf.ops.registry import Declared

THRESHOLDS_SCHEMA = "kperf-thresholds-2"
# a timed case of an op, as asv names it: bench_<op>.<Op>Time.track_time('<case>', ...)
TIMED_CASE = re.compile(r"^bench_(?P<op>\w+?)\.\w+\.track_(?:time|energy)\('(?P<case>[^']*)'")


def parse_bits(text: str) -> int:
    """A throttle-bit mask as thresholds.json writes it: always hexadecimal ("0x4")."""
    if not re.fullmatch(r"0x[0-9a-fA-F]+", text.strip()):
        raise ValueError(f"{text!r} is not a hexadecimal bit mask such as \"0x4\"")
    return int(text, 16)


@dataclass(frozen=True)
class KernelClass:
    name: str
    min_ratio: float = 0.0
    sd_floor: float = 0.0  # the smallest round-to-round spread (of log ratios) believed
    pair_offset_sd: float = 0.0  # spread of the offsets of pairs of worker processes
    exact: bool = False
    # exact, but a move the bad way is SLOW only where it costs (occupancy falls, spills or
    # scratch grow, cannot launch); else SAME, "changed", with the headroom (docs/gate.md)
    slow_only_with_cost: bool = False
    same_ratio: float | None = None  # SAME's band where wider than min_ratio (None: min_ratio)
    level_by_placement: bool = False  # a block's figure: the mean of its placed copies' medians
    placements: int | None = None  # its blocks' copies (None: sequential.placements)
    placement_arena_gb: float = 0.0  # ... drawn from slots of an arena this large (0: pads)
    placed_outputs: bool = False  # each copy's own allocations served from its arena slot
    rep_hold_min_s: float = 0.0  # a hold before every flushed rep (kperf/core/plan.py; 0: none)


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    klass: str
    higher_is_better: bool = False


@dataclass(frozen=True)
class Sequential:
    min_rounds: int
    max_rounds: int
    confirm_rounds: int
    trials_per_block: int
    rounds_per_generation: int
    trials_at_cap: int = 0  # a block whose warm-up ended at the power cap (0: trials_per_block)
    placements: int = 0  # a block's inputs and flush buffer moved to this many new places
    spending_power: float = 1.0  # alpha and beta spent over looks as (look/looks)**power
    disturbed_factor: float = 0.0  # a block's trials this many times the case's usual spread
    disturbed_floor: float = 0.0  # ... and above this: its round is measured again (0: never)
    host_behind_share: float = 0.0  # so many trials with the host behind the GPU: again too

    @property
    def looks(self) -> int:
        return self.max_rounds - self.min_rounds + 1


@dataclass(frozen=True)
class Thresholds:
    path: Path
    alpha: float
    beta: float
    correction: str
    clock_tolerance: float
    sequential: Sequential
    gate_wall_s: float
    case_wall_s: float
    power_fraction: float  # mean power >= this x the limit: at the power limit
    at_limit_share: float  # ... in at least this share of a side's blocks
    side_share: float  # the clock gap has the side's sign in at least this share of rounds
    power_cap_bits: dict[str, int]
    environment_bits: dict[str, int]
    classes: dict[str, KernelClass]
    rules: tuple[Rule, ...]
    pr_subset: tuple[str, ...]
    at_cap_class: str = ""  # the class a case at the power cap is judged as, if stricter
    # what the gate judges on a machine without a GPU when no -b is given (codegen)
    codegen_subset: tuple[str, ...] = (r"(Registers|Scratch|SharedMem|Occupancy)\.track_value",)
    # what the ops declare ((op, case) -> class; the PR subset's cases): None until first
    # asked, then read from the project's working tree (kperf/ops/registry.py)
    declared: Declared | None = None

    @classmethod
    def load(cls, path: Path) -> Thresholds:
        raw = load_json(path, "thresholds")
        return cls.from_dict(raw, Path(path))

    @classmethod
    def from_dict(cls, raw: dict[str, Any], path: Path) -> Thresholds:
        seq = Sequential(**{k: v for k, v in raw["sequential"].items() if k != "doc"})
        if seq.max_rounds < seq.min_rounds:
            raise ConfigError(path, f"max_rounds {seq.max_rounds} is below min_rounds "
                                    f"{seq.min_rounds}", "/sequential/max_rounds")
        classes = {name: _klass(name, spec) for name, spec in raw["classes"].items()}
        for name, klass in classes.items():
            if klass.same_ratio is not None and klass.same_ratio < klass.min_ratio:
                raise ConfigError(path, f"same_ratio {klass.same_ratio} is below min_ratio "
                                        f"{klass.min_ratio}: changes between the two could "
                                        f"never be decided", f"/classes/{name}/same_ratio")
            if klass.placed_outputs and not klass.placement_arena_gb:
                raise ConfigError(path, "placed_outputs needs placement_arena_gb: a copy's "
                                        "outputs are served from its arena slot",
                                  f"/classes/{name}/placed_outputs")
        rules = tuple(_rule(path, i, r, classes) for i, r in enumerate(raw["rules"]))
        for field_name in ("pr_subset", "codegen_subset"):
            for i, regex in enumerate(raw.get(field_name, [])):
                _compile(path, f"/{field_name}/{i}", regex)
        bits = raw["throttle_bits"]
        return cls(
            path=path, alpha=raw["alpha"], beta=raw["beta"], correction=raw["correction"],
            clock_tolerance=raw["clock_tolerance"], sequential=seq,
            gate_wall_s=raw["budget"]["gate_wall_s"], case_wall_s=raw["budget"]["case_wall_s"],
            power_fraction=raw["attribution"]["power_fraction"],
            at_limit_share=raw["attribution"]["at_limit_share"],
            side_share=raw["attribution"]["side_share"],
            power_cap_bits=_masks(bits["power_cap"]),
            environment_bits=_masks(bits["environment"]),
            classes=classes, rules=rules, pr_subset=tuple(raw["pr_subset"]),
            at_cap_class=_at_cap_class(path, raw.get("at_cap_class", ""), classes),
            **({"codegen_subset": tuple(raw["codegen_subset"])} if "codegen_subset" in raw
               else {}))

    def rule_for(self, case_name: str) -> tuple[Rule, KernelClass]:
        """The rule and class of a case: thresholds.json's first rule that matches its name
        (the static figures', the compiles', a project's override), else, for a timed case,
        the class its op declares. An op that declares none is refused, by name."""
        for rule in self.rules:
            if rule.pattern.search(case_name):
                return rule, self.classes[rule.klass]
        timed = TIMED_CASE.match(case_name)
        if not timed:
            raise ConfigError(self.path, f"no rule matches case {case_name!r}, and it is no "
                                         f"op's timed case (bench_<op>.<Op>Time.track_time"
                                         f"('<case>', ...))", "/rules")
        op, case = timed["op"], timed["case"]
        declared = self.declarations()
        if op not in declared.ops:
            raise ConfigError(self.path, f"{case_name}: no op {op!r} in the project (ops: "
                                         f"{', '.join(sorted(declared.ops)) or 'none'}); its "
                                         f"class is unknown", "/rules")
        # a case the op no longer has (a history's older commits): its op's class
        klass = declared.classes.get((op, case), declared.ops[op])
        if not klass:
            raise ConfigError(self.path, f"op {op!r} declares no class: give its OpDef a klass "
                                         f"(compute, bandwidth, decode, launch; a case may "
                                         f"declare its own), docs/new-op.md", "/rules")
        if klass not in self.classes:
            raise ConfigError(self.path, f"op {op!r} declares class {klass!r} for case "
                                         f"{case!r}; this file's classes are "
                                         f"{sorted(self.classes)}", "/classes")
        return Rule(re.compile(re.escape(case_name)), klass), self.classes[klass]

    def declarations(self) -> Declared:
        if self.declared is None:
            from kperf import project
            from kperf.ops.registry import working_tree_declarations

            here = self.path.parent
            root = here if (here / project.CONFIG_NAME).is_file() else None
            object.__setattr__(self, "declared", working_tree_declarations(root))
        return self.declared

    def pr_regexes(self) -> list[str]:
        """What the gate measures on a GPU when no -b is given: each op's declared PR
        cases (their compiled backends), and thresholds.json's ``pr_subset``."""
        declared = [rf"^bench_{re.escape(op)}\.\w+Time\.track_time\({re.escape(repr(case))}, "
                    rf"{re.escape(repr(dtype))}, '(?:{'|'.join(map(re.escape, backends))})'\)"
                    for op, case, dtype, backends in self.declarations().pr]
        return [*declared, *self.pr_subset]

    def class_at_cap(self, klass: KernelClass, capped_share: float) -> KernelClass:
        """``klass``, or ``at_cap_class`` for a case whose blocks the power controller
        mostly held down (``capped_share``), where that class reports only larger changes:
        there the time follows the board's power, whatever bounds the kernel
        (docs/gate.md)."""
        capped = self.classes.get(self.at_cap_class)
        if (capped is None or klass.exact or not mostly_capped(capped_share)
                or capped.min_ratio <= klass.min_ratio):
            return klass
        return capped


def mostly_capped(capped_share: float) -> bool:
    """A case is at the power cap when more than half its blocks were held down: the cap
    class and the order of the sides (kperf/gate/look.py) go by it."""
    return capped_share > 0.5


def _at_cap_class(path: Path, name: str, classes: dict[str, KernelClass]) -> str:
    if name and (name not in classes or classes[name].exact):
        raise ConfigError(path, f"at_cap_class {name!r} is not one of the timed classes "
                                f"{sorted(n for n, k in classes.items() if not k.exact)}",
                          "/at_cap_class")
    return name


def _klass(name: str, spec: dict[str, Any]) -> KernelClass:
    if spec.get("exact"):
        return KernelClass(name, exact=True,
                           slow_only_with_cost=bool(spec.get("slow_only_with_cost", False)))
    same = spec.get("same_ratio")
    return KernelClass(name, float(spec["min_ratio"]), float(spec["sd_floor"]),
                       float(spec.get("pair_offset_sd", 0.0)),
                       same_ratio=None if same is None else float(same),
                       level_by_placement=bool(spec.get("level_by_placement", False)),
                       placements=spec.get("placements"),
                       placement_arena_gb=float(spec.get("placement_arena_gb", 0.0)),
                       placed_outputs=bool(spec.get("placed_outputs", False)),
                       rep_hold_min_s=float(spec.get("rep_hold_min_s", 0.0)))


def _compile(path: Path, pointer: str, regex: str) -> re.Pattern[str]:
    try:
        return re.compile(regex)
    except re.error as err:
        raise ConfigError(path, f"bad regex {regex!r} ({err})", pointer) from err


def _rule(path: Path, index: int, raw: dict[str, Any], classes: dict[str, KernelClass]) -> Rule:
    if raw["class"] not in classes:
        raise ConfigError(path, f"class {raw['class']!r} is not one of {sorted(classes)}",
                          f"/rules/{index}/class")
    return Rule(_compile(path, f"/rules/{index}/match", raw["match"]), raw["class"],
                bool(raw.get("higher_is_better", False)))


def _masks(table: dict[str, str]) -> dict[str, int]:
    return {backend: parse_bits(text) for backend, text in table.items() if backend != "doc"}
