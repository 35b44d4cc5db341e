"""Run one op's Triton backend under TRITON_INTERPRET=1 on CPU tensors; print JSON results.

A separate process because the interpreter is chosen when ``@triton.jit`` runs, and the
same kernels must be real JIT functions for the ahead-of-time tests.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

os.environ["TRITON_INTERPRET"] = "1"


def main(op_name: str) -> int:
    from harness import checks
    from kernels.registry import get_op
    from kernels.targets import TARGETS

    op = get_op(op_name)
    results = []
    for target in TARGETS.values():
        for case in op.test_cases:
            for dtype in op.test_dtypes:
                item = {"target": target.name, "case": case.name, "dtype": dtype}
                try:
                    inputs = op.make_inputs(case, dtype, "cpu", 0)
                    built = op.backend("triton", case.name).build(case, dtype, target)
                    rtol, atol = op.tolerance.get(dtype, (1e-2, 1e-2))
                    agreement = checks.compare(built.fn(*inputs), op.reference(*inputs), rtol,
                                               atol, f"{op_name}/{case.name}/{dtype}")
                    item.update(ok=True, max_abs_err=agreement.max_abs_err)
                except Exception as err:
                    item.update(ok=False, error=f"{type(err).__name__}: {err}",
                                trace=traceback.format_exc()[-1500:])
                results.append(item)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
