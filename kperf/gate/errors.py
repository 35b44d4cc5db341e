"""The gate's exit codes and its one exception type (docs/gate.md, "Exit codes")."""

from __future__ import annotations

EXIT_PASS = 0  # every case SAME or FAST
EXIT_REGRESSION = 1  # a case is SLOW
EXIT_BROKEN = 2  # a benchmark broke at head (failed, crashed, hung, wrong result)
EXIT_INCONCLUSIVE = 3  # a case undecided within the budget, or no baseline for it
EXIT_GATE_ERROR = 4  # the gate itself failed: bad configuration, unreadable input, a crash

STATUS = {EXIT_PASS: "PASS", EXIT_REGRESSION: "REGRESSION", EXIT_BROKEN: "BROKEN",
          EXIT_INCONCLUSIVE: "INCONCLUSIVE", EXIT_GATE_ERROR: "GATE ERROR"}


class GateError(Exception):
    """A condition that ends the gate with a given exit code and a message."""

    def __init__(self, message: str, exit_code: int = EXIT_GATE_ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code
