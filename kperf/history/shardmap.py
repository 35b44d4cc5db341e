"""Which GPU runs which case: rendezvous hashing, kept in a map that records each change."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kperf import machine as machine_tool
from kperf.config import ConfigError, load_json
from kperf.history.gpus import FAKE_ENV, Gpu, ShardError

SCHEMA = "kperf-shards-1"


METHOD = "rendezvous-sha256"


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
    """The recorded assignment (kperf/schemas/shardmap.json), or None if there is none."""
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
    from kperf.core.record import atomic_write_json

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
