"""asv's files as the gate reads them: results (format 2), benchmarks.json, per-sample
records, the project config, and git.

Rounds measured by asv itself (stack comparisons, PR directories of gates before
kperf-gate-state-2) become ``model.Block``s here: one block per side per round, its
samples from asv's results, the telemetry of each sample from the records that
kperf/core/record.py wrote next to them (record schemas 1 and 2 are both read).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kperf import results
from kperf.core.telemetry import or_bits
from kperf.gate.errors import EXIT_BROKEN, EXIT_GATE_ERROR, EXIT_INCONCLUSIVE, GateError
from kperf.gate.model import Block, CaseData, one_method
from kperf.results import ResultsFileError, case_name

RECORD_SCHEMAS = ("kperf-record-1", "kperf-record-2")


def selected(name: str, regexes: Sequence[str]) -> bool:
    """Whether asv's ``-b`` regexes choose the case ``name`` (a ``case_name``): as asv
    matches them, any one found anywhere in it; no regexes choose everything."""
    return not regexes or any(re.search(r, name) for r in regexes)


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as err:
        raise ResultsFileError(path, "file not found") from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ResultsFileError(path, f"not valid JSON, truncated or corrupt ({err})") from err


def read_results_file(path: Path) -> tuple[str, dict[str, Block]]:
    """(env name, case name -> a Block without side and round) of one asv results file."""
    found = results.load(path)
    out: dict[str, Block] = {}
    for case in found.cases():
        try:
            out[case.name] = _block(case)
        except (TypeError, ValueError) as err:
            raise ResultsFileError(path, f"bad row for {case.benchmark}: {err}") from err
    return found.env_name, out


def _block(case: results.CaseResult) -> Block:
    if case.status == "failed":
        return Block("", 0, "failed", "failed in asv (see asv's log)")
    if case.status == "skipped":
        return Block("", 0, "skipped", "skipped by asv")
    return Block("", 0, samples=[float(s) for s in case.samples or []], value=float(case.value))


def read_benchmark_meta(results_dir: Path) -> dict[str, dict[str, Any]]:
    path = results_dir / "benchmarks.json"
    if not path.exists():
        return {}
    try:
        meta = _load(path)
    except ResultsFileError as err:
        raise GateError(str(err), EXIT_GATE_ERROR) from err
    if not isinstance(meta, dict):
        raise GateError(f"{path}: not an asv benchmarks.json (an object expected)")
    return {k: v for k, v in meta.items() if isinstance(v, dict)}


def read_records(records_dir: Path, commit: str, meta: dict[str, dict[str, Any]]
                 ) -> dict[tuple[str, str], list[dict]]:
    """(env, case name) -> its records of ``commit``, oldest first (one per process)."""
    out: dict[tuple[str, str], list[dict]] = {}
    if not records_dir.is_dir():
        return out
    for path in sorted(records_dir.rglob("*.json")):
        try:
            rec = _load(path)
        except ResultsFileError as err:
            raise GateError(f"record {err}", EXIT_GATE_ERROR) from err
        if not isinstance(rec, dict) or rec.get("schema") not in RECORD_SCHEMAS:
            raise GateError(f"{path}: not a kperf record (schema {RECORD_SCHEMAS})")
        if not str(rec.get("commit") or "").startswith(commit[:8]) or "measurement" not in rec:
            continue
        bench = rec.get("benchmark", "")
        names = meta.get(bench, {}).get("param_names", list(rec.get("params", {})))
        try:
            values = [repr(rec["params"][n]) for n in names]
        except KeyError as err:
            raise GateError(f"{path}: record lacks parameter {err}") from err
        out.setdefault((str(rec.get("env_name") or ""), case_name(bench, values)), []).append(rec)
    for recs in out.values():
        recs.sort(key=lambda r: float(r.get("recorded_at") or 0.0))
    return out


def _same(a: Sequence[float], b: Sequence[float]) -> bool:
    return len(a) == len(b) and all(math.isclose(x, y, rel_tol=1e-9)
                                    for x, y in zip(a, b, strict=True))


def attach_records(block: Block, recs: Sequence[dict]) -> None:
    """Per-sample telemetry from the records whose samples make up asv's, in order.

    Records of processes whose samples asv did not keep are passed over; telemetry is
    attached only when every sample is accounted for."""
    clocks: list[float | None] = []
    power: list[float | None] = []
    bits, limits, backend, pos = 0, [], "none", 0
    methods: list[str | None] = []
    while pos < len(block.samples):
        for rec in recs:
            m = rec["measurement"]
            recorded = [float(s) for s in m.get("samples") or []]
            if recorded and _same(recorded, block.samples[pos:pos + len(recorded)]):
                windows = m.get("windows") or []
                backend = str(m.get("telemetry_backend") or "none")
                if len(windows) != len(recorded):
                    windows = [{}] * len(recorded)
                clocks += [w.get("sm_clock_mhz_median") for w in windows]
                power += [w.get("power_w_mean") for w in windows]
                limits += [w["power_limit_w"] for w in windows if w.get("power_limit_w")]
                bits |= or_bits(w.get("throttle_bits_or") for w in windows) or 0
                methods.append(m.get("mode"))
                pos += len(recorded)
                break
        else:
            return  # a sample no record explains: no telemetry for this block
    block.clocks, block.power_w, block.backend = clocks, power, backend
    block.throttle_bits = bits
    block.power_limit_w = min(limits) if limits else None
    block.method = one_method(methods)


def results_files(round_dir: Path, machine: str, commit: str, hash_length: int) -> list[Path]:
    return sorted((round_dir / "results" / machine).glob(f"{commit[:hash_length]}-*.json"))


def load_asv_rounds(round_dirs: Sequence[Path], machine: str, base: str, head: str,
                    hash_length: int = 8) -> list[CaseData]:
    """Cases of rounds asv measured (``round-NN/results`` + ``records``), round by round."""
    cases: dict[tuple[str, str], CaseData] = {}
    for index, round_dir in enumerate(round_dirs, start=1):
        meta = read_benchmark_meta(round_dir / "results")
        for side, commit in (("base", base), ("head", head)):
            for env, name, block in _read_side(round_dir, machine, side, commit, hash_length,
                                               meta):
                block.side, block.round = side, index
                block.generation = index  # every asv round started fresh processes
                block.confirm = round_dir.name == "confirm"
                unit = str(meta.get(name.split("(")[0], {}).get("unit", "seconds"))
                cases.setdefault((env, name), CaseData(name, env, unit)).blocks.append(block)
    return list(cases.values())


def _read_side(round_dir: Path, machine: str, side: str, commit: str, hash_length: int,
               meta: dict[str, dict[str, Any]]) -> list[tuple[str, str, Block]]:
    files = results_files(round_dir, machine, commit, hash_length)
    code = EXIT_INCONCLUSIVE if side == "base" else EXIT_BROKEN
    label = "no baseline" if side == "base" else "no results at head"
    if not files:
        expected = round_dir / "results" / machine / f"{commit[:hash_length]}-<env>.json"
        raise GateError(f"{label}: {expected} does not exist ({side} {commit[:12]})", code)
    records = read_records(round_dir / "records", commit, meta)
    out = []
    for path in files:
        try:
            env, per_case = read_results_file(path)
        except ResultsFileError as err:
            raise GateError(str(err), EXIT_GATE_ERROR) from err
        for name, block in per_case.items():
            recs = records.get((env, name))
            if recs and block.status == "ok":
                attach_records(block, recs)
            out.append((env, name, block))
    return out


# --------------------------------------------------------------------------- git, config


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    if out.returncode != 0:
        raise GateError(f"git {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout.strip()


def resolve_base(repo: Path, head: str, base: str | None, main_branch: str) -> tuple[str, str]:
    """(sha, how it was chosen). Default: merge-base of head with the main branch."""
    if base:
        return git(repo, "rev-parse", f"{base}^{{commit}}"), f"given as {base}"
    for ref in (f"origin/{main_branch}", main_branch):
        probe = subprocess.run(["git", "rev-parse", "--verify", "-q", ref], cwd=repo,
                               capture_output=True, text=True)
        if probe.returncode == 0:
            return git(repo, "merge-base", head, ref), f"merge-base with {ref}"
    raise GateError(f"no baseline: neither origin/{main_branch} nor {main_branch} exists in "
                    f"{repo}; pass --base", EXIT_INCONCLUSIVE)


def load_project_conf(path: Path) -> dict[str, Any]:
    """asv.conf.json as asv reads it: JSON with // comments (json5, asv's own parser)."""
    import json5

    try:
        conf = json5.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as err:
        raise GateError(f"{path}: cannot read asv config ({err})") from err
    if not isinstance(conf, dict):
        raise GateError(f"{path}: an asv config must be a JSON object")
    return conf


def derived_config(conf: dict[str, Any], repo: Path, round_dir: Path) -> dict[str, Any]:
    """The project's asv config with results and site moved into ``round_dir``.

    asv resolves paths against the config's folder, so every path becomes absolute and
    ``{conf_dir}`` in commands points at the repository. Environments stay shared."""
    out = dict(conf)
    repo_url = str(conf.get("repo", "."))
    if "://" not in repo_url:
        out["repo"] = str((repo / repo_url).resolve())
    for key, default in (("env_dir", "env"), ("benchmark_dir", "benchmarks")):
        out[key] = str((repo / conf.get(key, default)).resolve())
    out["results_dir"] = str(round_dir / "results")
    out["html_dir"] = str(round_dir / "html")
    for key in ("build_command", "install_command", "uninstall_command"):
        if key in conf:
            out[key] = [c.replace("{conf_dir}", str(repo)) for c in conf[key]]
    return out


def guard_gate_dirs(repo: Path, conf: dict[str, Any], pr_dir: Path, out_dir: Path) -> None:
    """Before anything is written: the PR folder (deleted and rebuilt) must not overlap the
    results, records, site or repository; the report must not land among them."""
    from kperf.paths import PathError, check_scratch, is_within, kept_paths

    keep = kept_paths(repo, conf)
    check_scratch(pr_dir, keep, "--pr-dir", not_above=[repo])
    for label, kept in keep.items():
        if is_within(out_dir, kept):
            raise PathError(f"--out {out_dir} lies in the {label} {kept}; choose another "
                            f"folder for gate.md and gate.json")


def ensure_machine(name: str | None) -> str:
    from kperf import machine as machine_tool
    from kperf.config import load_json
    from kperf.paths import safe_name

    if name:
        safe_name(name, "--machine")
        entries = load_json(machine_tool.machine_file(), "machine-file", missing_ok=True) or {}
        if name in entries:
            return name
    info = machine_tool.describe(name)
    machine_tool.write_machine_file(info)
    return safe_name(info["machine"], "machine name")


BRANCH_SUFFIX = "@main"  # what asv appends to a series' name before matching its thresholds


def asv_threshold(entries: dict[str, float], name: str) -> float:
    """The threshold asv's publish gives the series ``name`` (asv's own code)."""
    from types import SimpleNamespace

    from asv.plugins.regressions import _GraphDataFilter

    conf = SimpleNamespace(regressions_thresholds=entries, regressions_first_commits={})
    matcher = _GraphDataFilter(conf, None, {})
    graph = SimpleNamespace(params={"branch": BRANCH_SUFFIX[1:]})
    return matcher._get_threshold(graph, {}, name)
