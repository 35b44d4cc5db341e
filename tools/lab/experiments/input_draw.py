"""How long does drawing a case's inputs take, on the host (then copied) and on the GPU?
Each op's largest case, first dtype, seed 0, median of three:

    python -m tools.lab.experiments.input_draw
"""

from __future__ import annotations

import statistics
import time

import torch

from kperf.ops.registry import get_op, op_names


def seconds(op, case, dtype: str, device: str, repeats: int = 3) -> float:
    """Drawn on ``device``, then on the GPU."""
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()  # host work and copies: a host timer after a sync
        [t.to("cuda") if isinstance(t, torch.Tensor) else t
         for t in op.make_inputs(case, dtype, device, 0)]
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    print("| op | case | elements | host, then copied | on the GPU |")
    print("|---|---|---|---|---|")
    for op in map(get_op, op_names()):
        case = max(op.cases, key=lambda c: op.bytes_moved(c, op.dtypes[0]))
        dtype = op.dtypes[0]
        made = op.make_inputs(case, dtype, "cuda", 0)
        elements = sum(t.numel() for t in made if isinstance(t, torch.Tensor))
        on_host, on_gpu = (seconds(op, case, dtype, device) for device in ("cpu", "cuda"))
        print(f"| {op.name} | {case.name} | {elements / 1e6:.0f} M | {on_host:.2f} s "
              f"| {on_gpu * 1e3:.1f} ms |")


if __name__ == "__main__":
    main()
