"""One asv process per GPU at once: each shard's cases, config, environment and results."""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kperf import machine as machine_tool
from kperf.config import ConfigError, load_json
from kperf.gate import asvio
from kperf.history.gpus import Gpu, ShardError
from kperf.history.shardmap import ShardMap
from kperf.paths import inside, make_scratch, remove_scratch

MAX_ALTERNATIVES = 64  # parameter sets per -b regex: keeps each argument short


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
    wanted = [g for g in gpus if not only or any(is_gpu(g, o) for o in only)]
    unknown = [o for o in only if not any(is_gpu(g, o) for g in gpus)]
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


def is_gpu(gpu: Gpu, text: str) -> bool:
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
    from kperf.history.asvrun import asv_env, run_asv

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
                             f"{log_tail(log)}")
        try:
            return json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ShardError(f"{path}: not valid JSON, truncated or corrupt ({err})") from err
    finally:
        remove_scratch(work, {"results": results_dir}, "discovery scratch")


def log_tail(path: Path, lines: int = 40) -> str:
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
