"""Op-specific checks of the memory-bound ops: softmax, rmsnorm, layernorm, swiglu.

The generic contract, interpreter and codegen runs are in test_ops.py; here: exact byte
counts, case sizes the bandwidth gate needs, the wide-row (looped) softmax path, vectorized
loads in the ahead-of-time code, and TileLang fragment layouts that spread rows over threads.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from kperf.ops.op import Case, Unsupported
from kperf.ops.registry import get_op
from kperf.ops.targets import TARGETS

from .conftest import REPO

BANDWIDTH_OPS = ("softmax", "rmsnorm", "layernorm", "swiglu")
MB = 1e6


@pytest.mark.parametrize("op_name", BANDWIDTH_OPS)
def test_bound_and_dtypes(op_name):
    op = get_op(op_name)
    assert op.klass == "bandwidth"
    assert tuple(op.dtypes) == ("fp16", "bf16")


@pytest.mark.parametrize("op_name", BANDWIDTH_OPS)
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_bytes_moved_is_inputs_plus_output(op_name, dtype):
    """bytes_moved is exactly every input read once plus the output written once."""
    op = get_op(op_name)
    for case in op.test_cases:
        inputs = op.make_inputs(case, dtype, "cpu", 0)
        read = sum(t.numel() * t.element_size() for t in inputs)
        written = op.reference(*inputs).numel() * inputs[0].element_size()
        assert op.bytes_moved(case, dtype) == read + written, case.name


@pytest.mark.parametrize("op_name", BANDWIDTH_OPS)
def test_cases_span_small_and_large(op_name):
    """At least one case past 256 MB (the >= 85 % of copy bandwidth target applies there),
    and one of 10-50 MB, where launch and tail effects show."""
    op = get_op(op_name)
    sizes = {c.name: op.bytes_moved(c, "fp16") for c in op.cases}
    assert 3 <= len(sizes) <= 5, sizes
    assert any(s >= 256 * MB for s in sizes.values()), sizes
    assert any(10 * MB <= s <= 50 * MB for s in sizes.values()), sizes
    assert all(op.flops(c) < 10 * c.dims["M"] * c.dims["N"] for c in op.cases)


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_vocab_rows_take_the_looped_softmax(target):
    from kernels.softmax import tilelang_softmax, triton_softmax

    op, tgt = get_op("softmax"), TARGETS[target]
    for case in op.cases:
        wide = case.dims["N"] > 8192
        assert triton_softmax.default_config(case, tgt).looped == wide, case.name
        assert tilelang_softmax.default_config(case, tgt).looped == wide, case.name
    logits = op.case("llama3-8b.logits-4k")
    cfg = triton_softmax.default_config(logits, tgt)
    assert logits.dims["N"] > cfg.BLOCK_N and cfg.BLOCK_M == 1


_LOOPED_SCRIPT = r"""
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch
from kperf.core import checks
from kperf.ops.op import Case
from kperf.ops.registry import get_op
from kernels.softmax import triton_softmax
from kperf.ops.targets import TARGETS

op = get_op("softmax")
results = []
# 1000 columns in chunks of 64: 15 full chunks and a ragged one; 48 columns in a chunk of 64:
# lanes that only ever see padding; -inf entries as a causal mask leaves them.
for name, rows, cols, masked in (("ragged", 5, 1000, False), ("narrow", 3, 48, False),
                                 ("masked", 4, 700, True)):
    case = Case(name, {"M": rows, "N": cols})
    for dtype, programs_per_sm in (("fp16", 0), ("fp32", 0), ("fp16", 2)):
        (x,) = op.make_inputs(case, dtype, "cpu", 1)
        if masked:
            x[:, 3::5] = float("-inf")
        # programs_per_sm=2 on the interpreter's one "SM": two programs stride over the rows
        built = triton_softmax.build(case, dtype, TARGETS["sm_90a"], looped=True, BLOCK_N=64,
                                     BLOCK_M=1, programs_per_sm=programs_per_sm)
        rtol, atol = op.tolerance[dtype]
        agreement = checks.compare(built.fn(x), op.reference(x), rtol, atol, name)
        results.append({"case": name, "dtype": dtype, "max_abs_err": agreement.max_abs_err,
                        "looped": built.config["looped"], "programs_per_sm": programs_per_sm})
print(json.dumps(results))
"""


def test_looped_softmax_under_interpreter():
    """The wide-row kernel, forced with a small chunk so a short row still loops."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", _LOOPED_SCRIPT], capture_output=True, text=True,
                         env=env, timeout=600, cwd=str(REPO))
    assert out.returncode == 0, out.stderr[-3000:]
    results = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(results) == 9 and all(r["looped"] for r in results), results
    assert sum(r["programs_per_sm"] == 2 for r in results) == 3


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_tilelang_looped_softmax_chunks_the_row(target):
    from kernels.softmax import tilelang_softmax
    from kperf.ops import compat

    tgt = TARGETS[target]
    case = get_op("softmax").case("llama3-8b.logits-4k")
    cfg = tilelang_softmax.default_config(case, tgt)
    source, attrs = compat.tilelang_lower_source(
        tilelang_softmax.prim_func(case, "fp16", cfg, tgt), tgt)
    chunks = -(-case.dims["N"] // cfg.block_N)
    # two passes over the row, each a loop of ceil(N / block_N) chunks
    assert len(re.findall(rf"< {chunks}; \+\+", source)) == 2, source[:2000]
    assert attrs["threads"] == cfg.threads


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_tilelang_looped_softmax_fixed_grid_and_staged_chunks(target):
    """A grid of ``programs_per_sm`` per SM strides over the rows; staged chunks are
    multi-buffered in shared memory (two passes, each with its own buffers)."""
    from dataclasses import replace

    from kernels.softmax import tilelang_softmax
    from kperf.ops import compat

    tgt = TARGETS[target]
    case = get_op("softmax").case("llama3-8b.logits-4k")
    plain = tilelang_softmax.default_config(case, tgt)
    staged = replace(plain, programs_per_sm=1, stages=2)
    source, attrs = compat.tilelang_lower_source(
        tilelang_softmax.prim_func(case, "fp16", staged, tgt), tgt)
    rows_per_program = -(-case.dims["M"] // tgt.sm_count)
    assert re.search(rf"< {rows_per_program}; \+\+", source), source[:2000]
    assert tilelang_softmax.looped_programs(case.dims["M"], staged, tgt) == tgt.sm_count
    chunk_bytes = plain.block_N * 2
    _, plain_attrs = compat.tilelang_lower_source(
        tilelang_softmax.prim_func(case, "fp16", plain, tgt), tgt)
    # 2 stages of one fp16 chunk, beyond what the unstaged kernel needs (sm_90a keeps both
    # passes' buffers, gfx942 reuses one pass's space for the other)
    assert attrs["shared_bytes"] - plain_attrs["shared_bytes"] >= 2 * chunk_bytes, attrs


def _fragment_elems(source: str, name: str) -> int:
    match = re.search(rf"\b(?:half_t|bfloat16_t|float) {name}\[(\d+)\];", source)
    assert match, f"no per-thread fragment {name!r} in the generated source"
    return int(match.group(1))


ROW_OPS = [(op, c.name) for op in ("rmsnorm", "layernorm", "softmax") for c in get_op(op).cases]


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize(("op_name", "case_name"), ROW_OPS)
def test_tilelang_rows_are_spread_over_threads(op_name, case_name, target):
    """Each thread holds its share of the block, not a whole row (TileLang's fallback layout)."""
    import importlib

    from kperf.ops import compat

    module = importlib.import_module(f"kernels.{op_name}.tilelang_{op_name}")
    tgt = TARGETS[target]
    case = get_op(op_name).case(case_name)
    cfg = module.default_config(case, tgt, "fp16")
    source, attrs = compat.tilelang_lower_source(module.prim_func(case, "fp16", cfg, tgt), tgt)
    block = cfg.block_N if getattr(cfg, "looped", False) else cfg.block_M * case.dims["N"]
    assert _fragment_elems(source, "x") * cfg.threads == block, cfg
    assert attrs["threads"] == cfg.threads
    assert cfg.threads % tgt.warp_size == 0


VECTOR_LOAD = {"amd": re.compile(r"(buffer|global)_load_dwordx4"),
               "nvidia": re.compile(r"ld\.global(\.\w+)*\.v4\.b32")}


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("op_name", BANDWIDTH_OPS)
def test_triton_aot_loads_are_vectorized(op_name, target):
    """With the JIT's alignment specialization the AOT code uses 16-byte loads, as at run time."""
    op, tgt = get_op(op_name), TARGETS[target]
    artifacts = op.backend("triton").aot(op.cases[0], "fp16", tgt)
    text = artifacts["amdgcn"] if tgt.vendor == "amd" else artifacts["ptx"]
    assert VECTOR_LOAD[tgt.vendor].search(text), f"{op_name}@{target}: no 16-byte global load"


@pytest.mark.parametrize("op_name", ["rmsnorm", "layernorm"])
def test_norm_rows_too_wide_are_unsupported(op_name):
    import importlib

    wide = Case("too-wide", {"M": 4, "N": 65536})
    for backend in ("triton", "tilelang"):
        module = importlib.import_module(f"kernels.{op_name}.{backend}_{op_name}")
        with pytest.raises(Unsupported, match=f"{op_name}/too-wide: N=65536"):
            module.default_config(wide, TARGETS["sm_90a"])


def test_tilelang_ragged_width_without_layout_is_unsupported():
    from kernels.rmsnorm import tilelang_rmsnorm

    with pytest.raises(Unsupported, match="not a multiple of 64 threads"):
        tilelang_rmsnorm.default_config(Case("odd", {"M": 8, "N": 300}), TARGETS["gfx942"])


def test_swiglu_rejects_mismatched_inputs():
    import torch

    from kernels.swiglu import triton_swiglu

    case = get_op("swiglu").test_cases[0]
    built = triton_swiglu.build(case, "fp32", TARGETS["sm_90a"])
    x = torch.zeros(8, 6)
    with pytest.raises(ValueError, match="triton_swiglu"):
        built.fn(x, torch.zeros(8, 5))
    with pytest.raises(ValueError, match="contiguous"):
        built.fn(x.t(), torch.zeros(6, 8))


def _smallest_case(op_name: str) -> str:
    op = get_op(op_name)
    return min(op.cases, key=lambda c: op.bytes_moved(c, "fp16")).name


GPU_RUNS = [(op, _smallest_case(op), be, dt) for op in BANDWIDTH_OPS
            for be in ("tilelang", "triton", "torch") for dt in ("fp16", "bf16")]


@pytest.mark.gpu
@pytest.mark.parametrize(("op_name", "case_name", "backend", "dtype"), GPU_RUNS)
def test_smallest_real_case_on_gpu(op_name, case_name, backend, dtype):
    """Every backend on the op's smallest real case, on the visible GPU, against fp32."""
    from kperf.core import checks
    from kperf.ops.targets import current_device_target

    op = get_op(op_name)
    case = op.case(case_name)
    built = op.backend(backend, case_name).build(case, dtype, current_device_target())
    inputs = op.make_inputs(case, dtype, "cuda", 0)
    rtol, atol = op.tolerance[dtype]
    checks.compare(built.fn(*inputs), op.reference(*inputs), rtol, atol,
                   f"{op_name}/{case_name}/{dtype}/{backend}")
