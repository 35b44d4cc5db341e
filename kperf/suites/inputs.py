"""A case's input sets, made once per measurement worker and handed out as copies: the
three backends of a case ask for the same seeded sets (``_case.CaseRunner``)."""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any

# Input sets as made (seeded), kept on the GPU so that a case's other backends get copies
# instead of making them again. Drawn on the host, that saved a large case's torch backend
# 1.6-5.6 s (H200 machine, 2026-12-01, docs/journal/2026-12-01.md); drawn on the GPU since
# 2026-12-02, a set takes milliseconds either way.
INPUT_SETS_BYTES = int(float(os.environ.get("KPERF_INPUT_SETS_GB", "8")) * 2**30)


def _nbytes(value: Any) -> int:
    storage = getattr(value, "untyped_storage", None)
    return storage().nbytes() if storage else 0


class InputSets:
    """Each input set of a case made once per worker, handed out as copies.

    The three backends of a case ask for the same seeded sets. Each asker gets its own
    copy (a fresh allocation, as a fresh ``make_inputs`` would give), so a kernel that
    writes to its inputs cannot change another's."""

    def __init__(self, limit_bytes: int = INPUT_SETS_BYTES) -> None:
        self.limit_bytes = limit_bytes
        self.sets: OrderedDict[tuple[Any, ...], tuple[Any, ...]] = OrderedDict()
        self.made = self.copied = 0

    def get(self, op: Any, case: Any, dtype: str, device: str, seed: int) -> tuple[Any, ...]:
        key = (op.name, case.name, tuple(sorted(case.dims.items())), dtype, device, seed)
        kept = self.sets.get(key)
        if kept is None:
            kept = tuple(op.make_inputs(case, dtype, device, seed))
            self.made += 1
            self.sets[key] = kept
            self._evict()
        else:
            self.sets.move_to_end(key)
            self.copied += 1
        return tuple(t.clone() if hasattr(t, "clone") else t for t in kept)

    def _evict(self) -> None:
        while len(self.sets) > 1 and sum(
                _nbytes(t) for kept in self.sets.values() for t in kept) > self.limit_bytes:
            self.sets.popitem(last=False)


class SharedInputs:
    """``op`` whose ``make_inputs`` draws from a worker's ``InputSets``."""

    def __init__(self, op: Any, sets: InputSets) -> None:
        self._op, self._sets = op, sets

    def __getattr__(self, name: str) -> Any:
        return getattr(self._op, name)

    def make_inputs(self, case: Any, dtype: str, device: str, seed: int) -> tuple[Any, ...]:
        return self._sets.get(self._op, case, dtype, device, seed)
