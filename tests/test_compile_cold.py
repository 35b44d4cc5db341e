"""A compile measured as cold must be one: TileLang keeps compiled kernels in memory."""

from __future__ import annotations

import time

from kperf.core import static
from kperf.ops.registry import get_op
from kperf.ops.targets import SM90A


def test_second_tilelang_compile_in_a_process_is_real():
    op = get_op("gemm")
    case, backend = op.case("square-4096"), op.backend("tilelang")
    first = backend.aot(case, "fp16", SM90A)
    start = time.perf_counter()
    second = backend.aot(case, "fp16", SM90A)
    seconds = time.perf_counter() - start
    # a memory-cache hit returns in ~10 ms and writes no cubin; nvcc takes seconds
    assert "cubin" in first and "cubin" in second
    regs = [static.figures(a, "nvidia")["registers"] for a in (first, second)]
    assert regs[0] == regs[1] > 0  # the same kernel, compiled twice
    assert seconds > 0.3, f"second compile took {seconds:.3f} s: a cache hit, not a compile"
