"""The PR regression gate: base against head on one GPU, one verdict per case.

Layers: ``model`` and ``sequential`` decide (pure functions over blocks and telemetry),
``config`` reads thresholds.json, ``measure`` runs the workers, ``asvio`` reads asv's files,
``report`` writes gate.md and gate.json, ``cli`` is ``python -m tools.gate``.
"""

from tools.gate.errors import (
    EXIT_BROKEN,
    EXIT_GATE_ERROR,
    EXIT_INCONCLUSIVE,
    EXIT_PASS,
    EXIT_REGRESSION,
    GateError,
)

__all__ = ["EXIT_BROKEN", "EXIT_GATE_ERROR", "EXIT_INCONCLUSIVE", "EXIT_PASS",
           "EXIT_REGRESSION", "GateError"]
