"""The gate's word on generated code: per target and gfx942 toolchain, a verdict and one
line per changed kernel that says what changed in the code's own terms ("occupancy 3 → 2
waves, limited by LDS: 16 → 32 KB"), and where a kernel's source changed but its device
code did not ("num_stages 3 → 2: gfx942 code unchanged").

Read from a run's static blocks (each carries every figure of its kernel's code, its
``code_sha`` and its tile ``config``: kperf/gate/measure.py) and compile blocks, and from
the verdicts of the static-figure and compile cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kperf.core.static import register_headroom
from kperf.gate.model import Verdict
from kperf.specs import GateCase

ORDER = {"BROKEN": 0, "SLOW": 1, "INCONCLUSIVE": 2, "FAST": 3, "SAME": 4}
NAMES = {"tilelang": "TileLang", "triton": "Triton"}
Figures = dict[str, Any]


@dataclass
class Kernel:
    """One kernel's code for one target (and gfx942 toolchain), at base and at head."""

    op: str
    case: str
    dtype: str
    backend: str
    target: str
    toolchain: str | None
    base: Figures | None = None
    head: Figures | None = None
    verdicts: list[Verdict] = field(default_factory=list)
    note: str = ""  # an upgrade's components one at a time (kperf/stacks/upgrade.py)

    @property
    def key(self) -> str:
        """``target|name|base toolchain``: the kernel in every run of one upgrade."""
        return f"{self.target}|{self.name}|{(self.toolchain or '').split(' → ')[0]}"

    @property
    def name(self) -> str:
        return f"{self.op} {self.case} {self.dtype} {NAMES.get(self.backend, self.backend)}"

    @property
    def unmeasured(self) -> bool:
        return bool(self.verdicts) and all(v.unchanged for v in self.verdicts)

    def code_unchanged(self) -> bool | None:
        """Whether both sides' device code is the same (None: a side's digest unknown)."""
        shas = [f.get("code_sha") if f else None for f in (self.base, self.head)]
        return None if None in shas else shas[0] == shas[1]

    def verdict(self) -> str:
        return worst(self.verdicts)


def worst(verdicts: Sequence[Verdict]) -> str:
    """A group's verdict: BROKEN, else SLOW, else INCONCLUSIVE, else FAST, else SAME."""
    words = ["BROKEN" if v.broke else v.verdict for v in verdicts]
    return min(words, key=ORDER.__getitem__, default="SAME")


def kernels(cases: Sequence[GateCase], rows: Sequence[dict[str, Any]],
            verdicts: Sequence[Verdict]) -> list[Kernel]:
    """Every kernel the codegen cases of a run name, with each side's figures (its first
    static block's, else a compile block's digest) and the verdicts of its cases."""
    by_case: dict[str, Kernel] = {}
    found: dict[tuple, Kernel] = {}
    for case in cases:
        if case.get("kind") not in ("static", "compile"):
            continue
        spec = case.get("spec") or {}
        chain = case.get("toolchain")
        if chain and case.get("toolchain_head", chain) != chain:  # an upgrade's toolchain
            chain = f"{chain} → {case['toolchain_head']}"
        ident = (*(str(spec.get(k, "")) for k in ("op", "case", "dtype", "backend")),
                 str(case.get("target", "")), chain)
        by_case[case["name"]] = found.setdefault(ident, Kernel(*ident))
    for row in rows:
        kernel = by_case.get(row["case"])
        figures = row.get("figures")
        if kernel is None or row.get("status", "ok") != "ok" or not figures:
            continue
        side = row["side"]
        known = getattr(kernel, side)
        if known is None or ("config" in figures and "config" not in known):
            setattr(kernel, side, figures)
    for v in verdicts:
        if v.case in by_case:
            by_case[v.case].verdicts.append(v)
    return list(found.values())


def _kb(x: Any) -> str:
    """KB, or bytes under 1 KB (16 bytes of scratch never read as "0.0 KB")."""
    if 0 < abs(float(x)) < 1024:
        return f"{int(x)} B"
    kb = float(x) / 1024
    return f"{kb:g} KB" if kb.is_integer() else f"{kb:.1f} KB"


def _bytes(x: Any) -> str:
    return f"{int(x)} B"


def _plain(x: Any) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


# (figure, its name in a line, how its value reads); gfx942's names, sm_90a's below
GFX_FIGURES = (("registers", "VGPRs", _plain), ("agprs", "AGPRs", _plain),
               ("sgprs", "SGPRs", _plain), ("vgpr_spills", "VGPR spills", _plain),
               ("sgpr_spills", "SGPR spills", _plain), ("scratch_bytes", "scratch", _kb),
               ("shared_bytes", "LDS", _kb), ("code_bytes", "code", _bytes))
SM_FIGURES = (("registers", "registers a thread", _plain), ("scratch_bytes", "local memory", _kb),
              ("shared_bytes", "shared memory", _kb), ("code_bytes", "code", _bytes))
# what an occupancy limit names, as the figure that sets it
LIMITS = {"VGPRs": "registers", "SGPRs": "sgprs", "LDS": "shared_bytes",
          "registers": "registers", "shared": "shared_bytes"}


def config_change(base: Figures | None, head: Figures | None) -> str:
    """``block_K 32 → 64``: the tile configuration's fields that differ."""
    before = (base or {}).get("config") or {}
    after = (head or {}).get("config") or {}
    keys = [k for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
    return ", ".join(f"{k} {before.get(k, '—')} → {after.get(k, '—')}" for k in keys)


def _table(target: str) -> dict[str, tuple[str, Any]]:
    return {k: (n, f) for k, n, f in (GFX_FIGURES if target.startswith("gfx") else SM_FIGURES)}


def occupancy_change(base: Figures, head: Figures, target: str) -> tuple[str, set[str]]:
    """(``occupancy 3 → 2 waves, limited by LDS: 16 → 32 KB``, the figures it named), or
    ('', none) where occupancy held."""
    b, h = base.get("occupancy"), head.get("occupancy")
    if b is None or h is None or b == h:
        return "", set()
    unit = "waves" if target.startswith("gfx") else "warps per scheduler"
    text = f"occupancy {_plain(b)} → {_plain(h)} {unit}"
    why, named = [], set()
    table = _table(target)
    for part in (p for p in str(head.get("occupancy_limit") or "").split("+") if p):
        figure = LIMITS.get(part)
        before, after = (base.get(figure), head.get(figure)) if figure else (None, None)
        if figure in table and before is not None and after is not None and before != after:
            name, fmt = table[figure]
            why.append(f"{name}: {fmt(before)} → {fmt(after)}")
            named.add(figure)
        else:
            why.append(part)
    return text + (f", limited by {' and '.join(why)}" if why else ""), named


def figure_changes(base: Figures, head: Figures, target: str,
                   skip: set[str] | None = None) -> list[str]:
    """``VGPRs 144 → 148``, ...: every figure that moved, but those in ``skip``."""
    out = []
    for figure, (name, fmt) in _table(target).items():
        before, after = base.get(figure), head.get(figure)
        if before is None or after is None or before == after or figure in (skip or set()):
            continue
        out.append(f"{name} {fmt(before)} → {fmt(after)}")
    return out


def compile_note(kernel: Kernel) -> str:
    """``cold compile SLOW x1.52 (1.52 → 2.31 CPU s)`` (three digits: ``0.116 → 0.123``)
    where the compile case is not SAME (INCONCLUSIVE: a change between none and the
    class's threshold, or too noisy)."""
    for v in kernel.verdicts:
        if v.unit == "seconds" and v.verdict != "SAME" and v.ratio and not v.unchanged:
            return (f"cold compile {v.verdict} x{v.ratio:.2f} ({v.before:.3g} → "
                    f"{v.after:.3g} CPU s)")
    return ""


def cause_line(kernel: Kernel) -> str:
    """What a measured kernel's change is in the code's terms; '' for one not measured."""
    if kernel.unmeasured:
        return ""
    config = config_change(kernel.base, kernel.head)
    lead = f"{kernel.name}: " + (f"{config}: " if config else "")
    target = f"{kernel.target} code"
    if kernel.base is None or kernel.head is None:
        return lead + f"{target} not read on both sides (see the table)"
    compiled = compile_note(kernel)
    if kernel.code_unchanged():
        return lead + f"{target} unchanged" + (f"; {compiled}" if compiled else "")
    occupancy, named = occupancy_change(kernel.base, kernel.head, kernel.target)
    moved = figure_changes(kernel.base, kernel.head, kernel.target, named)
    room = "" if occupancy or not any(
        kernel.base.get(k) != kernel.head.get(k) for k in ("registers", "shared_bytes")) \
        else register_headroom(kernel.head, kernel.target.startswith("gfx"))
    parts = [p for p in [occupancy, *moved, room and f"occupancy unchanged: {room}", compiled]
             if p]
    return lead + ("; ".join(parts) if parts else
                   f"{target} changed, no figure moved (the instructions differ)") + (
        f" ({kernel.note})" if kernel.note else "")


def group_label(kernel: Kernel) -> tuple[str, str]:
    """(target, what made its code): gfx942's toolchain for TileLang; Triton's own LLVM."""
    if kernel.target.startswith("gfx") and kernel.backend == "tilelang":
        return kernel.target, kernel.toolchain or "the run's toolchain"
    return kernel.target, "Triton's LLVM" if kernel.backend == "triton" else "nvcc"


def groups(found: Sequence[Kernel]) -> list[tuple[str, str, list[Kernel]]]:
    """(target, toolchain, its kernels): one row per gfx942 toolchain, holding TileLang's
    kernels under it and Triton's gfx942 kernels (the same under every toolchain: a team
    reads each toolchain's row as the gfx942 verdict under it), and one per other target."""
    chains: dict[str, set[str]] = {}  # each AMD target's own toolchains
    for k in found:
        if k.toolchain:
            chains.setdefault(k.target, set()).add(k.toolchain)
    out: dict[tuple[str, str], list[Kernel]] = {}
    for k in found:
        target, maker = group_label(k)
        if target.startswith("gfx") and k.backend == "triton" and chains.get(target):
            for chain in sorted(chains[target]):
                out.setdefault((target, chain), []).append(k)
        else:
            out.setdefault((target, maker if target.startswith("gfx") else
                            "nvcc · Triton's LLVM"), []).append(k)
    return [(t, c, ks) for (t, c), ks in sorted(out.items())]


def section(found: Sequence[Kernel], not_here: dict[str, str], md: Any) -> list[str]:
    """The Markdown of the codegen section: a row per target and toolchain (its verdict
    and what changed), then what this machine could not build. ``md`` escapes text."""
    if not found:
        return []
    lines = ["#### Generated code, per target and toolchain", "",
             "| target | toolchain | verdict | what changed |", "|---|---|---|---|"]
    for target, chain, members in groups(found):
        measured = [k for k in members if not k.unmeasured]
        verdict = worst([v for k in members for v in k.verdicts])
        causes = [cause_line(k) for k in sorted(measured, key=lambda k: (k.op, k.backend))]
        quiet = len(members) - len(measured)
        if quiet:
            causes.append(f"{quiet} kernel(s) not measured: source unchanged")
        cell = "<br>".join(md(c) for c in causes if c) or "—"
        lines.append(f"| {md(target)} | {md(chain)} | **{verdict}** | {cell} |")
    if not_here:
        lines += ["", "Not judged on this machine (another runner's, e.g. the CPU codegen "
                      "runner's): " + "; ".join(f"{md(k)}: {md(v)}"
                                                for k, v in sorted(not_here.items()))]
    return [*lines, ""]


def summary_json(found: Sequence[Kernel]) -> list[dict[str, Any]]:
    """gate.json's ``codegen``: each group's verdict and its kernels' lines."""
    return [{"target": target, "toolchain": chain,
             "verdict": worst([v for k in members for v in k.verdicts]),
             "kernels": [{"kernel": k.name, "backend": k.backend, "verdict": k.verdict(),
                          "measured": not k.unmeasured, "code_unchanged": k.code_unchanged(),
                          "config_change": config_change(k.base, k.head),
                          "line": cause_line(k)} for k in members]}
            for target, chain, members in groups(found)]
