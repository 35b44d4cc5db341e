"""Pages of the PR gate's kept reports (gate.json / gate.md, schema kperf-gate-1 or -2) and
of the thresholds it judges by. Reports are untrusted text: the templates escape every
field, and gate.md is shown as text, not rendered."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from kperf.paths import inside
from kperf.site.data import Notes
from kperf.site.pages import fmt_num, fmt_time, render

KEEP_DIR = Path(".asv") / "gate-reports"  # where `kperf publish --keep-gate` keeps one
STATUS_CLASS = {0: "verdict-SAME", 1: "verdict-SLOW", 2: "verdict-SLOW", 3: "verdict-INCONCLUSIVE"}


def _value(v: Any, unit: str) -> str:
    if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
        return "—"
    return fmt_time(v) if unit in ("seconds", "s") else f"{fmt_num(v, 4)} {unit}"


def _ci(ci: Any) -> str:
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(
            isinstance(x, int | float) for x in ci):
        return f"[{ci[0]:.4f}, {ci[1]:.4f}]"
    return "—"


def _when(rep: dict[str, Any]) -> str:
    return dt.datetime.fromtimestamp(rep["_mtime"], dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _cases(rep: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in rep.get("cases", []) if isinstance(c, dict)]


def _verdict(c: dict[str, Any]) -> str:
    """A case's word: BROKEN where it failed, crashed or was wrong at head."""
    return "BROKEN" if c.get("broke") is True else str(c.get("verdict", ""))


def _case_row(c: dict[str, Any]) -> dict[str, Any]:
    ratio, unit = c.get("ratio"), str(c.get("unit", ""))
    return {"case": c.get("case"), "env": c.get("env"), "verdict": _verdict(c),
            "ratio_exact": ratio if isinstance(ratio, float) else None,
            "ratio": fmt_num(ratio, 4) if isinstance(ratio, int | float) else "—",
            "ci": _ci(c.get("ci")), "before": _value(c.get("before"), unit),
            "after": _value(c.get("after"), unit), "reason": c.get("reason")}


def report_page(rep: dict[str, Any], commit_url: str) -> str:
    return render("gate_report.html", title=f"Gate report {rep.get('label') or rep['_id']}",
                  here="gate", depth=2, rep=rep, commit_url=commit_url, when=_when(rep),
                  status_class=STATUS_CLASS.get(rep.get("exit_code"), ""),
                  base=str(rep.get("base") or ""), head=str(rep.get("head") or ""),
                  cases=[_case_row(c) for c in _cases(rep)])


def _listing_row(rep: dict[str, Any]) -> dict[str, Any]:
    counts = Counter(_verdict(c) for c in _cases(rep))
    return {"id": rep["_id"], "name": rep.get("label") or rep["_id"],
            "status": rep.get("status"), "status_class": STATUS_CLASS.get(rep.get("exit_code"), ""),
            "counts": ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
            "base": str(rep.get("base") or ""), "head": str(rep.get("head") or ""),
            "machine": rep.get("machine"), "when": _when(rep)}


def _settings(th: dict[str, Any]) -> dict[str, Any]:
    settings = {k: th.get(k) for k in ("alpha", "beta", "correction", "clock_tolerance")
                if k in th}
    for group in ("sequential", "budget", "attribution"):  # kperf-thresholds-2
        settings.update({f"{group}.{k}": v for k, v in (th.get(group) or {}).items()
                         if k != "doc"})
    return settings


def _upgrade_row(rep: dict[str, Any]) -> dict[str, Any]:
    """An upgrade report (gate.json with ``stacks``) as the upgrade page lists it."""
    stacks = rep.get("stacks") if isinstance(rep.get("stacks"), dict) else {}
    label = {side: str((stacks.get(side) or {}).get("label", "?")) for side in ("base", "head")}
    groups = [{"target": g.get("target"), "toolchain": g.get("toolchain"),
               "verdict": str(g.get("verdict", "")),
               "lines": [str(k.get("line") or k.get("kernel")) for k in g.get("kernels") or []
                         if isinstance(k, dict) and k.get("line")]}
              for g in rep.get("codegen") or [] if isinstance(g, dict)]
    return {"id": rep["_id"], **label, "commit": str(rep.get("head") or ""),
            "status": rep.get("status"), "status_class": STATUS_CLASS.get(rep.get("exit_code"), ""),
            "machine": rep.get("machine"), "when": _when(rep), "groups": groups}


def write(out: Path, reports: list[dict[str, Any]], thresholds: dict[str, Any] | None,
          notes: Notes, commit_url: str) -> Path:
    """``out``/gate/index.html, one page per report, and ``out``/upgrade.html (the upgrade
    reports, newest first); returns the index path."""
    upgrades = sorted((r for r in reports if isinstance(r.get("stacks"), dict)),
                      key=lambda r: -r["_mtime"])
    (out / "upgrade.html").write_text(render(
        "upgrade.html", title="Before you upgrade", here="upgrade", depth=1,
        commit_url=commit_url, reports=[_upgrade_row(r) for r in upgrades]))
    gate_dir = out / "gate"
    gate_dir.mkdir(parents=True, exist_ok=True)
    for rep in reports:
        (gate_dir / f"{rep['_id']}.html").write_text(report_page(rep, commit_url))
    th = thresholds or {}
    classes = th.get("classes") if isinstance(th.get("classes"), dict) else {}
    index = gate_dir / "index.html"
    index.write_text(render(
        "gate_index.html", title="Gate reports", here="gate", depth=2, notes=notes,
        commit_url=commit_url, reports=[_listing_row(r) for r in reports], th=thresholds,
        classes=[(n, c) for n, c in classes.items() if isinstance(c, dict)],
        rules=[r for r in th.get("rules", []) if isinstance(r, dict)],
        settings=_settings(th)))
    return index


def keep_gate(src: Path, repo: Path, name: str | None = None) -> Path:
    """Copy a gate run's gate.json and gate.md into .asv/gate-reports/<name>/; a ``name``
    that is not one plain name (``..``, ``a/b``) is refused (``PathError``)."""
    folder = src if src.is_dir() else src.parent
    gate_json = folder / "gate.json"
    if not gate_json.exists():
        raise SystemExit(f"{gate_json}: no gate report there")
    if not name:
        try:
            rep = json.loads(gate_json.read_text())
        except ValueError:
            rep = {}
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        name = "-".join(str(x) for x in (rep.get("label") or rep.get("machine") or "gate",
                                         str(rep.get("head") or "")[:8], stamp) if x)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).lstrip("._-") or stamp
    dest = inside(repo / KEEP_DIR, name, what="--name")
    dest.mkdir(parents=True, exist_ok=True)
    for fname in ("gate.json", "gate.md"):
        if (folder / fname).exists():
            shutil.copyfile(folder / fname, dest / fname)
    return dest
