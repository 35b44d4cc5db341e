"""Run the suite over the GPUs of one host: each GPU its own asv machine, each case on one GPU.

    python -m tools.history.shard gpus                    # the GPUs found and their machine names
    python -m tools.history.shard plan [-b REGEX]         # which GPU runs which case
    python -m tools.history.shard run [--range A..B] [-b REGEX] [--only GPU]
    python -m tools.history.shard gate [--base B] [--head H] [-b REGEX]   # the PR gate, per GPU
    ... --reassign "why"                          # accept a changed GPU set, recording it

Two GPUs of the same model differ by a few percent (3% on two H200s for one small kernel),
so a case's history must stay on one GPU. Every case is assigned to a GPU by rendezvous
hashing (the GPU whose hash of (UUID, case) is largest): stable across runs, unaffected
by new cases, and a GPU added to the host takes only the cases it wins (about 1/N). The
assignment and every change to it are kept in ``<results_dir>/shards/<host>.shardmap``
(JSON); a GPU set that differs from the recorded one is refused until ``--reassign`` says
why, and the reassignment (which case moved from which GPU to which) is recorded.

``run`` starts one asv process per GPU at once, each with only its GPU visible
(CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES), its own machine ``<host>-<gpu>-<uuid8>``,
its own environment directory (a build in one shard never races another), and its own
``benchmarks.json``; results go through a link into ``<results_dir>/<machine>/``, and
``asv publish`` runs once over all of them. ``gate`` measures each GPU's cases there, base
and head interleaved, all GPUs at once, and decides all cases together (one false-alarm
correction); the report names the GPU that judged each case.

``KPERF_FAKE_GPUS="uuid[=model],..."`` stands in for the GPUs (tests, dry runs on a CPU).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tools import machine as machine_tool
from tools.config import ConfigError, load_json
from tools.gate import asvio
from tools.gate.cli import add_gate_options
from tools.gate.config import Thresholds
from tools.gate.errors import GateError
from tools.paths import PathError, inside, make_scratch, remove_scratch

SCHEMA = "kperf-shards-1"
METHOD = "rendezvous-sha256"
FAKE_ENV = "KPERF_FAKE_GPUS"
MAX_ALTERNATIVES = 64  # parameter sets per -b regex: keeps each argument short


class ShardError(GateError):
    """A condition that stops a sharded run before anything is measured (in ``shard
    gate``: exit 4 with its message, like any other error of the gate's setup)."""


# --------------------------------------------------------------------------- GPUs


@dataclass(frozen=True)
class Gpu:
    index: int  # position in NVML's / amdsmi's list (PCI order): what *_VISIBLE_DEVICES gets
    uuid: str
    model: str
    vendor: str  # nvidia | amd | fake
    serial: str = ""

    @property
    def short(self) -> str:
        return machine_tool.uuid_suffix(self.uuid)

    @property
    def label(self) -> str:
        return f"{self.index}:{self.short}"


def enumerate_gpus(environ: Mapping[str, str] | None = None) -> list[Gpu]:
    """The GPUs this host offers, read through NVML or amdsmi, never through a GPU context.

    A restriction already in the environment (CUDA_VISIBLE_DEVICES; on ROCm also
    HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES) limits the set to those GPUs.
    """
    env = os.environ if environ is None else environ
    if env.get(FAKE_ENV, "").strip():
        return parse_fake_gpus(env[FAKE_ENV])
    reasons = []
    for vendor, find in (("nvidia", _nvidia_gpus), ("amd", _amd_gpus)):
        try:
            found = find(env)
        except Exception as err:  # no driver or no library: an answer, not an error
            reasons.append(f"{vendor}: {type(err).__name__}: {err}")
            continue
        if found:
            return _unique(found)
        reasons.append(f"{vendor}: no GPU visible")
    raise ShardError("no GPU found (" + "; ".join(reasons) + f"); set {FAKE_ENV}="
                     "'uuid1,uuid2' for a dry run without GPUs")


def parse_fake_gpus(text: str) -> list[Gpu]:
    gpus = []
    for index, entry in enumerate(e.strip() for e in text.split(",")):
        uuid, _, model = entry.partition("=")
        if not uuid.strip():
            raise ShardError(f"{FAKE_ENV}={text!r}: entry {index} has no UUID")
        gpus.append(Gpu(index, uuid.strip(), model.strip() or "fake-gpu", "fake"))
    return _unique(gpus)


def _unique(gpus: list[Gpu]) -> list[Gpu]:
    for attr in ("uuid", "short"):
        seen: dict[str, Gpu] = {}
        for g in gpus:
            other = seen.setdefault(getattr(g, attr), g)
            if other is not g:
                raise ShardError(f"GPUs {other.index} ({other.uuid}) and {g.index} ({g.uuid}) "
                                 f"share the {attr} {getattr(g, attr)!r}: their asv machines "
                                 f"would have the same name")
    return gpus


def _nvidia_gpus(env: Mapping[str, str]) -> list[Gpu]:
    import pynvml as n

    def text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    n.nvmlInit()
    try:
        every = []
        for index in range(n.nvmlDeviceGetCount()):
            h = n.nvmlDeviceGetHandleByIndex(index)
            try:
                serial = text(n.nvmlDeviceGetSerial(h))
            except n.NVMLError:
                serial = ""
            every.append(Gpu(index, text(n.nvmlDeviceGetUUID(h)), text(n.nvmlDeviceGetName(h)),
                             "nvidia", serial))
    finally:
        n.nvmlShutdown()
    return visible_nvidia(every, env)


def visible_nvidia(every: list[Gpu], env: Mapping[str, str]) -> list[Gpu]:
    """The GPUs CUDA_VISIBLE_DEVICES leaves: indices in PCI bus order (as NVML counts) or
    UUIDs (a unique prefix suffices, as for CUDA)."""
    entries = [e.strip() for e in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if e.strip()]
    if "CUDA_VISIBLE_DEVICES" not in env:
        return every
    out = []
    for entry in entries:
        if entry.isdigit():
            match = [g for g in every if g.index == int(entry)]
        else:
            match = [g for g in every if g.uuid.lower().startswith(entry.lower())]
        if len(match) != 1:
            break  # CUDA stops at the first entry it cannot resolve
        out.append(match[0])
    return out


def _amd_gpus(env: Mapping[str, str]) -> list[Gpu]:
    """Through the telemetry's own amdsmi source, so the UUID text is the one the machine
    description uses, and its visibility mapping decides which GPUs are left."""
    from harness.telemetry.amd import AmdSmiSource, AmdSmiUnavailable, import_amdsmi

    smi = import_amdsmi()
    smi.amdsmi_init()
    try:
        count = len(smi.amdsmi_get_processor_handles())
    finally:
        smi.amdsmi_shut_down()
    out = []
    with _environ(env):  # AmdSmiSource maps device indices through os.environ
        for k in range(count):
            try:
                source = AmdSmiSource(k)
            except AmdSmiUnavailable as err:
                if "is not visible" in str(err):
                    break
                raise
            try:
                ident = source.identity()
                out.append(Gpu(source.physical_index, str(ident.get("gpu_uuid") or ""),
                               str(ident.get("gpu") or "amd-gpu"), "amd",
                               str(ident.get("gpu_serial") or "")))
            finally:
                source.close()
    missing = [g.index for g in out if not g.uuid]
    if missing:
        raise ShardError(f"amdsmi reports no UUID for GPU(s) {missing}: cannot name them")
    return out


@contextlib.contextmanager
def _environ(env: Mapping[str, str]) -> Iterator[None]:
    if env is os.environ:
        yield
        return
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


# --------------------------------------------------------------------------- assignment


def weight(case: str, uuid: str) -> int:
    digest = hashlib.sha256(f"{uuid}\0{case}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def owner(case: str, uuids: Iterable[str]) -> str:
    """Rendezvous hashing: the GPU with the largest weight for this case."""
    return max(uuids, key=lambda u: (weight(case, u), u))


@dataclass
class ShardMap:
    host: str
    gpus: dict[str, dict[str, Any]]  # uuid -> index, model, vendor, machine
    cases: dict[str, str]  # case -> uuid
    history: list[dict[str, Any]] = field(default_factory=list)
    method: str = METHOD

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "method": self.method, "host": self.host,
                "gpus": self.gpus, "cases": dict(sorted(self.cases.items())),
                "history": self.history}

    def counts(self, cases: Iterable[str] | None = None) -> dict[str, int]:
        names = self.cases if cases is None else cases
        out = dict.fromkeys(self.gpus, 0)
        for case in names:
            out[self.cases[case]] += 1
        return out


def shard_file(results_dir: Path, host: str) -> Path:
    # Not a .json file: asv publish would take a .json among results for a results file.
    return results_dir / "shards" / f"{machine_tool.slug(host)}.shardmap"


def load_map(path: Path) -> ShardMap | None:
    """The recorded assignment (tools/schemas/shardmap.json), or None if there is none."""
    try:
        raw = load_json(path, "shardmap", missing_ok=True)
    except ConfigError as err:
        raise ShardError(str(err)) from err
    if raw is None:
        return None
    for case, uuid in raw["cases"].items():
        if uuid not in raw["gpus"]:
            raise ShardError(f"{path}: case {case!r} is assigned to {uuid!r}, which is not "
                             f"in its 'gpus'")
    return ShardMap(raw["host"], raw["gpus"], raw["cases"], raw["history"])


def save_map(path: Path, shard_map: ShardMap) -> None:
    from harness.record import atomic_write_json

    atomic_write_json(path, shard_map.to_json())


def set_change(recorded: ShardMap, gpus: Sequence[Gpu]) -> tuple[list[str], list[str]]:
    """(added, removed) UUIDs of the GPU set against the recorded one."""
    now = {g.uuid for g in gpus}
    return sorted(now - set(recorded.gpus)), sorted(set(recorded.gpus) - now)


def check_gpu_set(recorded: ShardMap | None, gpus: Sequence[Gpu], reassign: str | None,
                  path: Path) -> None:
    """Refuse a changed GPU set unless the reassignment is asked for, with a reason."""
    if recorded is None or reassign:
        return
    added, removed = set_change(recorded, gpus)
    if not added and not removed:
        return
    moving = sum(new != old for new, old in _reassigned(recorded, gpus).items()
                 if old is not None)
    raise ShardError(
        f"{path}: the GPUs of {recorded.host} changed since the assignment was recorded "
        f"(added: {added or 'none'}; removed: {removed or 'none'}). Cases are never moved "
        f"silently: {moving} of {len(recorded.cases)} would move to another GPU, which "
        f"starts their history afresh there. Run again with --reassign 'why' to accept "
        f"and record it, or restore the GPU set (CUDA_VISIBLE_DEVICES / "
        f"HIP_VISIBLE_DEVICES, {FAKE_ENV}).")


def _reassigned(recorded: ShardMap, gpus: Sequence[Gpu]) -> dict[str, str]:
    """Each recorded case's GPU under the new set: a case moves only if its GPU left, or
    to a GPU that joined and wins it (for a rendezvous-made map: the minimal movement)."""
    uuids = [g.uuid for g in gpus]
    added = set(uuids) - set(recorded.gpus)
    out = {}
    for case, current in recorded.cases.items():
        winner = owner(case, uuids)
        out[case] = winner if current not in uuids or winner in added else current
    return out


def update_map(recorded: ShardMap | None, gpus: Sequence[Gpu], machines: Mapping[str, str],
               cases: Iterable[str], host: str, reassign: str | None = None,
               path: Path = Path("shards")) -> tuple[ShardMap, list[str]]:
    """The assignment for this run and what changed: new cases get their GPU; recorded
    cases keep theirs; a changed GPU set needs ``reassign`` (the reason) and is recorded."""
    check_gpu_set(recorded, gpus, reassign, path)
    uuids = [g.uuid for g in gpus]
    info = {g.uuid: {"index": g.index, "model": g.model, "vendor": g.vendor,
                     "serial": g.serial, "machine": machines[g.uuid]} for g in gpus}
    date = datetime.now(UTC).isoformat(timespec="seconds")
    notes: list[str] = []
    if recorded is None:
        shard_map = ShardMap(host, info, {}, [{"date": date, "event": "created",
                                               "gpus": sorted(uuids)}])
    else:
        shard_map = ShardMap(recorded.host, info, dict(recorded.cases), list(recorded.history))
        added, removed = set_change(recorded, gpus)
        if added or removed:
            shard_map.cases = _reassigned(recorded, gpus)
            moved = {c: [recorded.cases[c], new] for c, new in sorted(shard_map.cases.items())
                     if recorded.cases[c] != new}
            shard_map.history.append({
                "date": date, "event": "reassigned", "reason": reassign,
                "gpus_before": sorted(recorded.gpus), "gpus_after": sorted(uuids),
                "added": added, "removed": removed, "moved": moved,
                "n_moved": len(moved), "n_cases": len(shard_map.cases)})
            notes.append(f"reassigned ({reassign}): {len(moved)} of {len(shard_map.cases)} "
                         f"cases moved; added {added or 'none'}, removed {removed or 'none'}")
        elif reassign:
            notes.append("--reassign given but the GPU set is unchanged: nothing moved")
        for uuid, now in info.items():
            was = recorded.gpus.get(uuid, {}).get("index", now["index"])
            if was != now["index"]:
                notes.append(f"GPU {uuid} is now index {now['index']} (was {was})")
    new = [c for c in cases if c not in shard_map.cases]
    for case in new:
        shard_map.cases[case] = owner(case, uuids)
    if new:
        notes.append(f"{len(new)} new case(s) assigned")
    return shard_map, notes


# --------------------------------------------------------------------------- cases


def benchmark_cases(meta: Mapping[str, Any]) -> dict[str, list[str]]:
    """benchmark -> its case names as asv matches ``-b``: ``name(p0, p1, ...)``, or ``name``."""
    out = {}
    for name, bench in sorted(meta.items()):
        if not isinstance(bench, dict):
            continue  # the file's "version"
        params = bench.get("params") or []
        if params:
            out[name] = [f"{name}({', '.join(combo)})" for combo in itertools.product(*params)]
        else:
            out[name] = [name]
    return out


def select(cases: Iterable[str], regexes: Sequence[str]) -> list[str]:
    """asv's rule: a case is selected when any regex is found in its name."""
    compiled = [re.compile(r) for r in regexes]
    return [c for c in cases if not compiled or any(r.search(c) for r in compiled)]


def bench_of(case: str) -> str:
    return case.split("(", 1)[0]


def shard_regexes(cases: Iterable[str], per_bench: Mapping[str, list[str]]) -> list[str]:
    """asv ``-b`` regexes selecting exactly these cases: one per benchmark when the shard
    has all its cases, else anchored alternatives of its parameter sets."""
    mine: dict[str, list[str]] = {}
    for case in cases:
        mine.setdefault(bench_of(case), []).append(case)
    out = []
    for bench, names in sorted(mine.items()):
        name = re.escape(bench)
        if per_bench[bench] == [bench]:
            out.append(f"^{name}$")
        elif set(names) == set(per_bench[bench]):
            out.append(f"^{name}\\(")
        else:
            params = sorted(re.escape(c[len(bench) + 1:-1]) for c in names)
            for i in range(0, len(params), MAX_ALTERNATIVES):
                chunk = "|".join(params[i:i + MAX_ALTERNATIVES])
                out.append(f"^{name}\\((?:{chunk})\\)$")
    return out


# --------------------------------------------------------------------------- machines


def describe_machines(gpus: Sequence[Gpu], host: str) -> dict[str, dict[str, str]]:
    """uuid -> machine-file entry, named ``<host>-<gpu model>-<uuid8>``.

    Real GPUs are described each by a child that sees only that GPU (in parallel); fake
    ones share this host's description with the GPU's fields put in.
    """
    if all(g.vendor == "fake" for g in gpus):
        base = machine_tool.describe()
        found = {g.uuid: {**base, "gpu": g.model, "gpu_uuid": g.uuid,
                          "telemetry": "fake"} for g in gpus}
    else:
        with ThreadPoolExecutor(max_workers=len(gpus)) as pool:
            infos = list(pool.map(lambda g: machine_tool.describe_gpu(g.index), gpus))
        found = {}
        for g, info in zip(gpus, infos, strict=True):
            if info.get("gpu_uuid") and info["gpu_uuid"] != g.uuid:
                raise ShardError(f"GPU {g.index}: enumerated as {g.uuid} but described as "
                                 f"{info['gpu_uuid']}: the visibility variables picked "
                                 f"another GPU")
            found[g.uuid] = {**info, "gpu_uuid": g.uuid}
    for g in gpus:
        entry = found[g.uuid]
        if g.serial and not entry.get("gpu_serial"):
            entry["gpu_serial"] = g.serial
        entry["machine"] = machine_tool.machine_name(host, entry.get("gpu") or g.model, g.uuid)
    return found


# --------------------------------------------------------------------------- running asv


@dataclass
class Shard:
    gpu: Gpu
    machine: str
    cases: list[str]
    regexes: list[str]
    work_dir: Path  # <repo>/.asv/shards/<uuid8>: its environments, config, log

    @property
    def env_dir(self) -> Path:
        return self.work_dir / "env"

    def environment(self) -> dict[str, str]:
        """What the shard's processes add to their environment: only its GPU visible,
        compiler caches of its own (shards compile the same kernels at the same time), and
        a HOME of its own holding just its machine entry: every ``asv run`` rewrites
        ``~/.asv-machine.json`` in place, so shards sharing one raced on it (one read the
        file while another had truncated it)."""
        env = machine_tool.gpu_visibility_env(self.gpu.index, {})
        env["TRITON_CACHE_DIR"] = str(self.work_dir / "cache" / "triton")
        env["TILELANG_CACHE_DIR"] = str(self.work_dir / "cache" / "tilelang")
        env["HOME"] = str(self._private_home())
        return env

    def _private_home(self) -> Path:
        home = self.work_dir / "home"
        shared = machine_tool.machine_file()
        try:
            entries = load_json(shared, "machine-file", missing_ok=True) or {}
        except ConfigError as err:
            raise ShardError(str(err)) from err
        if self.machine not in entries:
            raise ShardError(f"{shared}: no entry for machine {self.machine!r}")
        machine_tool.write_machine_file(entries[self.machine], home / ".asv-machine.json")
        return home


def build_shards(shard_map: ShardMap, gpus: Sequence[Gpu], selected: Sequence[str],
                 per_bench: Mapping[str, list[str]], repo: Path,
                 only: Sequence[str] = ()) -> list[Shard]:
    """One shard per GPU that has selected cases (``only``: just these GPUs, by index,
    UUID or UUID suffix)."""
    wanted = [g for g in gpus if not only or any(_is(g, o) for o in only)]
    unknown = [o for o in only if not any(_is(g, o) for g in gpus)]
    if unknown:
        raise ShardError(f"--only {unknown}: no such GPU (have {[g.label for g in gpus]})")
    out = []
    for g in wanted:
        cases = [c for c in selected if shard_map.cases[c] == g.uuid]
        if cases:
            out.append(Shard(g, shard_map.gpus[g.uuid]["machine"], cases,
                             shard_regexes(cases, per_bench),
                             inside(repo / ".asv" / "shards", g.short, what="GPU folder")))
    return out


def _is(gpu: Gpu, text: str) -> bool:
    return text in (str(gpu.index), gpu.uuid, gpu.short, gpu.label)


def config_for(conf: Mapping[str, Any], repo: Path, work_dir: Path,
               results_dir: Path | None = None, env_dir: Path | None = None) -> Path:
    """A derived asv config (absolute paths) under ``work_dir``; returns its path."""
    out = asvio.derived_config(dict(conf), repo, work_dir)
    if results_dir is not None:
        out["results_dir"] = str(results_dir)
    if env_dir is not None:
        out["env_dir"] = str(env_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    path = work_dir / "asv.conf.json"
    path.write_text(json.dumps(out, indent=2))
    return path


def discover(repo: Path, conf: Mapping[str, Any], results_dir: Path,
             machine: str) -> dict[str, Any]:
    """benchmarks.json for the working tree's suite, written into ``results_dir``.

    The suite is discovered in this interpreter (``-E existing:same``): nothing is built,
    and asv reads benchmarks from the working tree for every commit anyway.
    """
    from tools.history.asvrun import asv_env, run_asv

    work = make_scratch(results_dir.parent / f".discover-{os.getpid()}",
                        {"results": results_dir}, "discovery scratch")
    try:
        conf_path = config_for(conf, repo, work, results_dir=results_dir)
        args = ["--config", str(conf_path), "run", "-E", "existing:same", "--bench",
                "just-discover", "--machine", machine]
        log = work / "discover.log"
        rc = run_asv(args, asv_env(machine, repo), repo, log=log).returncode
        path = results_dir / "benchmarks.json"
        if rc != 0 or not path.exists():
            raise ShardError(f"discovering the benchmarks failed (asv exit {rc}):\n"
                             f"{_tail(log)}")
        try:
            return json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ShardError(f"{path}: not valid JSON, truncated or corrupt ({err})") from err
    finally:
        remove_scratch(work, {"results": results_dir}, "discovery scratch")


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"({path} not readable)"


def link_results(shard_results: Path, results_dir: Path, machine: str) -> None:
    """``shard_results/<machine>`` -> ``results_dir/<machine>``: results land in the shared
    directory; the shard's benchmarks.json stays its own (asv rewrites it on every run)."""
    target = inside(results_dir, machine, what="machine name")
    target.mkdir(parents=True, exist_ok=True)
    link = inside(shard_results, machine, what="machine name")
    shard_results.mkdir(parents=True, exist_ok=True)
    if link.is_symlink():
        link.unlink()
    elif link.exists():
        raise ShardError(f"{link} exists and is not a link to {target}; remove it")
    link.symlink_to(target.resolve(), target_is_directory=True)


def run_parallel(shards: Sequence[Shard], job: Callable[[Shard], int],
                 log_of: Callable[[Shard], Path]) -> dict[str, int]:
    """``job`` for every shard at once; GPU label -> its exit code."""
    lock = threading.Lock()

    def one(shard: Shard) -> int:
        start = time.monotonic()
        try:
            rc = job(shard)
        except Exception as err:  # reported with the shard's name, the others carry on
            with lock:
                print(f"[GPU {shard.gpu.label}] failed: {type(err).__name__}: {err}",
                      flush=True)
            return 1
        with lock:
            print(f"[GPU {shard.gpu.label}] {shard.machine}: exit {rc} after "
                  f"{time.monotonic() - start:.0f} s (log {log_of(shard)})",
                  flush=True)
        return rc

    with ThreadPoolExecutor(max_workers=max(1, len(shards))) as pool:
        codes = list(pool.map(one, shards))
    return {s.gpu.label: rc for s, rc in zip(shards, codes, strict=True)}


@dataclass
class Context:
    repo: Path
    conf: dict[str, Any]
    conf_path: Path
    results_dir: Path
    host: str
    gpus: list[Gpu]
    map_path: Path
    recorded: ShardMap | None
    cpu_only: bool


def context(args: argparse.Namespace) -> Context:
    repo = args.repo.resolve()
    conf_path = (args.config or repo / "asv.conf.json").resolve()
    conf = asvio.load_project_conf(conf_path)
    results_dir = (repo / conf.get("results_dir", "results")).resolve()
    host = args.host or machine_tool.host_name()
    gpus = enumerate_gpus()
    map_path = (args.shard_file or shard_file(results_dir, host)).resolve()
    recorded = load_map(map_path)
    check_gpu_set(recorded, gpus, args.reassign, map_path)  # before anything slow
    # The GPU set above already honours it; left in place it would filter the shards'
    # processes again and shift their HIP_VISIBLE_DEVICES index.
    os.environ.pop("ROCR_VISIBLE_DEVICES", None)
    if all(g.vendor == "fake" for g in gpus):
        cpu_only = True
    else:
        from tools.machine import has_gpu

        cpu_only = not has_gpu()
    return Context(repo, conf, conf_path, results_dir, host, gpus, map_path, recorded,
                   cpu_only)


def prepare(ctx: Context, args: argparse.Namespace, discover_into: Path, save: bool,
            ) -> tuple[ShardMap, dict[str, list[str]], list[Shard]]:
    """Machines written, suite discovered, assignment updated, shards for the selection."""
    infos = describe_machines(ctx.gpus, ctx.host)
    for info in infos.values():
        machine_tool.write_machine_file(info)
    first = infos[ctx.gpus[0].uuid]["machine"]
    per_bench = benchmark_cases(discover(ctx.repo, ctx.conf, discover_into, first))
    every = [c for cases in per_bench.values() for c in cases]
    machines = {uuid: info["machine"] for uuid, info in infos.items()}
    shard_map, notes = update_map(ctx.recorded, ctx.gpus, machines, every, ctx.host,
                                  args.reassign, ctx.map_path)
    if save:
        save_map(ctx.map_path, shard_map)
    for note in notes:
        print(f"shards: {note}")
    benches = args.bench or default_benches(ctx)
    selected = select(every, benches)
    if not selected:
        raise ShardError(f"no benchmark case matches {benches}")
    shards = build_shards(shard_map, ctx.gpus, selected, per_bench, ctx.repo, args.only or ())
    print_plan(shard_map, ctx.gpus, selected, shards)
    if not shards:
        raise ShardError(f"none of the {len(selected)} selected case(s) is assigned to the "
                         f"GPU(s) chosen with --only {args.only}")
    return shard_map, per_bench, shards


def default_benches(ctx: Context) -> list[str]:
    from tools.history.asvrun import CPU_SUITES

    if ctx.cpu_only:
        print("No GPU: only the CPU-side suites (static figures, compile times) are run.")
        return [CPU_SUITES]
    return []


def print_plan(shard_map: ShardMap, gpus: Sequence[Gpu], selected: Sequence[str],
               shards: Sequence[Shard]) -> None:
    counts = shard_map.counts(selected)
    running = {s.gpu.uuid for s in shards}
    print(f"{len(selected)} case(s) over {len(gpus)} GPU(s) of {shard_map.host}:")
    for g in gpus:
        mark = "" if g.uuid in running else "  (not run)"
        print(f"  GPU {g.label:<12} {shard_map.gpus[g.uuid]['machine']:<40} "
              f"{counts[g.uuid]:>5} case(s){mark}")


# --------------------------------------------------------------------------- commands


def cmd_gpus(args: argparse.Namespace) -> int:
    host = args.host or machine_tool.host_name()
    for g in enumerate_gpus():
        name = machine_tool.machine_name(host, g.model, g.uuid)
        print(f"GPU {g.label:<12} {g.vendor:<7} {g.model:<24} {g.uuid}  -> {name}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    ctx = context(args)
    prepare(ctx, args, ctx.results_dir, save=True)
    print(f"assignment: {ctx.map_path}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from tools.history.asvrun import asv_env, publish_site, run_asv

    ctx = context(args)
    _, _, shards = prepare(ctx, args, ctx.results_dir, save=True)
    revisions = range_arg(ctx.repo, args.range)

    def job(shard: Shard) -> int:
        shard_results = shard.work_dir / "results"
        link_results(shard_results, ctx.results_dir, shard.machine)
        conf_path = config_for(ctx.conf, ctx.repo, shard.work_dir, results_dir=shard_results,
                               env_dir=shard.env_dir)
        env = asv_env(shard.machine, ctx.repo, cpu_only=ctx.cpu_only)
        env.update(shard.environment())
        run_args = ["--config", str(conf_path), "run", "--machine", shard.machine,
                    "--record-samples", "--show-stderr", revisions]
        for regex in shard.regexes:
            run_args += ["-b", regex]
        log = shard.work_dir / "asv.log"
        log.unlink(missing_ok=True)
        return run_asv(run_args, env, ctx.repo, log=log).returncode

    codes = run_parallel(shards, job, lambda s: s.work_dir / "asv.log")
    # 2: some benchmark failed (recorded); 1 with NEW: nothing new for that GPU's machine
    fine = {0, 2} | ({1} if args.range == "NEW" else set())
    broken = {label: rc for label, rc in codes.items() if rc not in fine}
    for shard in shards:
        if codes[shard.gpu.label] != 0:
            print(f"--- GPU {shard.gpu.label}: last lines of {shard.work_dir / 'asv.log'}\n"
                  f"{_tail(shard.work_dir / 'asv.log')}", file=sys.stderr)
    if broken:
        print(f"asv run failed on GPU(s) {broken}; nothing published", file=sys.stderr)
        return max(broken.values())
    if not args.no_publish:
        env = asv_env(shards[0].machine, ctx.repo, cpu_only=ctx.cpu_only)
        pub = publish_site(env, ctx.repo, ["--config", str(ctx.conf_path)],
                           ctx.repo / ctx.conf.get("html_dir", "html"),
                           Path(env["KPERF_RECORD_DIR"]))
        if pub != 0:
            return pub
    return 2 if 2 in codes.values() else 0


def range_arg(repo: Path, range_spec: str | None) -> str:
    """asv's range argument: HEAD by default, else the range as given (A..B, NEW, ALL,
    HASHFILE:...), the same for every shard."""
    if range_spec:
        return range_spec
    return f"{asvio.git(repo, 'rev-parse', 'HEAD')}^!"


# --------------------------------------------------------------------------- the gate


def cmd_gate(args: argparse.Namespace) -> int:
    """The PR gate (tools.gate) with one lane per GPU: each GPU measures the cases the
    assignment gives it, base and head side by side on that GPU, all GPUs at once; the
    cases are decided together (one correction) and the report names each case's GPU."""
    from tools.gate import cli as gate_cli

    return gate_cli.run(args, sharded_plan, gpu_column=True)


def sharded_plan(args: argparse.Namespace, repo: Path, pr_dir: Path, th: Thresholds):
    """The gate's plan with one lane per GPU that owns a selected case."""
    from tools.gate import cli as gate_cli
    from tools.gate.plan import Lane

    args.repo = repo
    ctx = context(args)
    plan = gate_cli.plan_run(args, repo, pr_dir, th)
    infos = describe_machines(ctx.gpus, ctx.host)
    machines = {uuid: info["machine"] for uuid, info in infos.items()}
    every = [c["name"] for c in gate_cli.suite_cases(repo)]
    shard_map, notes = update_map(ctx.recorded, ctx.gpus, machines, every, ctx.host,
                                  args.reassign, ctx.map_path)
    for note in notes:
        print(f"shards: {note}")
    selected = [c["name"] for c in plan.cases]
    wanted = [g for g in ctx.gpus if not args.only or any(_is(g, o) for o in args.only)]
    plan.lanes = [Lane(g.label, machine_tool.gpu_visibility_env(g.index, {}),
                       [c for c in selected if shard_map.cases.get(c) == g.uuid])
                  for g in wanted]
    plan.lanes = [lane for lane in plan.lanes if lane.cases]
    if not plan.lanes:
        raise ShardError(f"none of the {len(selected)} selected case(s) is assigned to the "
                         f"GPU(s) chosen with --only {args.only}")
    plan.machine = f"{len(plan.lanes)} GPU(s) of {ctx.host}, each judging its own cases"
    return plan


# --------------------------------------------------------------------------- CLI


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="repository root (cwd)")
    parser.add_argument("--config", type=Path, help="asv config (default <repo>/asv.conf.json)")
    parser.add_argument("--host", help="host part of the machine names and of the assignment "
                                       "file (default: this host's name; CI: a stable label)")
    parser.add_argument("--shard-file", type=Path,
                        help="assignment file (default <results_dir>/shards/<host>.shardmap)")
    parser.add_argument("--reassign", metavar="REASON",
                        help="accept a changed GPU set; the reason is recorded with the moves")
    parser.add_argument("--only", action="append", metavar="GPU",
                        help="run only this GPU's cases (index, UUID or its suffix); "
                             "the assignment still spans every GPU")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.history.shard",
                                     description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    sub = parser.add_subparsers(dest="command", required=True)
    gpus = sub.add_parser("gpus", help="list the GPUs and their machine names")
    gpus.add_argument("--host")
    for name, text in (("plan", "show (and record) the assignment"),
                       ("run", "run the shards in parallel, then asv publish")):
        p = sub.add_parser(name, help=text)
        _common(p)
        p.add_argument("-b", "--bench", action="append", help="asv benchmark regex")
        if name == "run":
            p.add_argument("--range", help="asv range: A..B, NEW, ALL, HASHFILE:f "
                                           "(default: HEAD only)")
            p.add_argument("--no-publish", action="store_true")
    g = sub.add_parser("gate", help="the PR gate with every GPU judging its own cases "
                                    "(options and exit codes as python -m tools.gate)")
    _common(g)
    add_gate_options(g)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handlers = {"gpus": cmd_gpus, "plan": cmd_plan, "run": cmd_run, "gate": cmd_gate}
    try:
        return handlers[args.command](args)
    except (ShardError, GateError, PathError) as err:
        print(f"shard: {err}", file=sys.stderr)
        # `gate` reports its own errors (a ShardError too) through the gate's exit codes
        return err.exit_code if isinstance(err, GateError) and not isinstance(
            err, ShardError) else 2


if __name__ == "__main__":
    sys.exit(main())
