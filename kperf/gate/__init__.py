"""The PR regression gate: base against head on one GPU, one verdict per case."""

from kperf.gate.errors import (
    EXIT_BROKEN,
    EXIT_GATE_ERROR,
    EXIT_INCONCLUSIVE,
    EXIT_PASS,
    EXIT_REGRESSION,
    GateError,
)

__all__ = ["EXIT_BROKEN", "EXIT_GATE_ERROR", "EXIT_INCONCLUSIVE", "EXIT_PASS",
           "EXIT_REGRESSION", "GateError"]
