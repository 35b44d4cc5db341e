"""The checks every project runs on each of its ops (kperf's own tests/test_ops.py and the
tests/test_kperf_ops.py that ``kperf init`` writes call them), so a new op folder is
covered by adding it, and a broken one fails by name:

- ``problems``: the op's contract, its declared class, and its benchmark file in step
  with it (what ``kperf check`` says);
- ``interpret``: its Triton kernels under ``TRITON_INTERPRET=1`` on CPU tensors at its
  small ``test_cases``, against the reference (each output tensor);
- ``codegen``: each compiled backend down to a device binary for each target, and the
  static figures read from it.

    python -m kperf.testing interpret OP   # (a process of its own: the interpreter is
                                           #  chosen when @triton.jit runs) -> JSON
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

from kperf import project

COMPILED = ("tilelang", "triton")


def ops(root: Path | None = None) -> list[str]:
    """The ops of the project (its working tree), for a test's parameters."""
    from kperf.ops.registry import op_names

    proj = project.of(root) if root else project.find()
    proj.use_working_tree()
    return op_names(proj.ops)


def problems(name: str, root: Path | None = None) -> list[str]:
    """What is wrong with op ``name``: its contract, its class, its benchmark file."""
    from kperf.gate.config import Thresholds
    from kperf.ops.registry import class_of, get_op

    proj = project.of(root) if root else project.find()
    proj.use_working_tree()
    op = get_op(name, proj.ops)
    found: list[str] = []
    if not op.cases:
        found.append("no cases")
    if len({c.name for c in op.cases}) != len(op.cases):
        found.append("two cases share a name")
    if getattr(op, "baseline", "") not in op.backends:
        found.append(f"its baseline {getattr(op, 'baseline', '')!r} is not one of its "
                     f"backends {sorted(op.backends)}")
    for case in op.cases:
        try:
            if op.bytes_moved(case, op.dtypes[0]) <= 0 or op.flops(case) < 0:
                found.append(f"case {case.name}: flops < 0 or bytes moved <= 0")
        except Exception as err:
            found.append(f"case {case.name}: flops/bytes_moved raise {type(err).__name__}: "
                         f"{err}")
    classes = Thresholds.load(proj.thresholds).classes
    for case in op.cases:
        klass = class_of(op, case.name)
        if not klass:
            found.append("declares no class (OpDef klass: compute, bandwidth, decode or "
                         "launch; docs/new-op.md)")
            break
        if klass not in classes or classes[klass].exact:
            found.append(f"case {case.name}: class {klass!r} is none of the timed classes "
                         f"of {proj.thresholds.name} ({', '.join(sorted(classes))})")
    found += bench_problems(op, proj)
    return found


def bench_problems(op: Any, proj: project.Project) -> list[str]:
    """Where ``benchmarks/bench_<op>.py`` and the op's declaration differ."""
    from kperf import benchfile
    from kperf.core.worker import register_package

    path = proj.root / "benchmarks" / f"bench_{op.name}.py"
    if not path.is_file():
        return [f"no {path.relative_to(proj.root)}: `kperf check --write` writes it"]
    if "benchmarks" not in sys.modules:
        register_package(proj.root / "benchmarks" / "__init__.py")
    try:
        module = importlib.import_module(f"benchmarks.bench_{op.name}")
    except Exception as err:
        return [f"{path.name} does not import: {type(err).__name__}: {err}"]
    have = benchfile.read(module)
    if have is None:
        return [f"{path.name} makes no op's suites (op_suites)"]
    want = benchfile.spec_of_op(op)
    out = [f"{path.name}: {field} {getattr(have, field)!r} != the op's {getattr(want, field)!r}"
           for field in ("op", "cases", "dtypes") if getattr(have, field) != getattr(want, field)]
    if set(have.backends) != set(want.backends):
        out.append(f"{path.name}: backends {sorted(have.backends)} != the op's "
                   f"{sorted(want.backends)}")
    if have.codegen_case not in want.cases:
        out.append(f"{path.name}: codegen_case {have.codegen_case!r} is not a case of the op")
    if out:
        out.append("`kperf check --write` writes the file from the op")
    return out


def interpret(name: str, root: Path | None = None, timeout_s: float = 1200) -> list[dict]:
    """The op's Triton backend under the interpreter at each test case, dtype and target,
    in a process of its own: ``[{"case", "dtype", "target", "ok", "error"?}]``."""
    proj = project.of(root) if root else project.find()
    env = dict(os.environ, TRITON_INTERPRET="1", **project.environment(proj))
    env["PYTHONPATH"] = os.pathsep.join(
        [proj.import_path(), str(Path(__file__).resolve().parents[1]),
         *filter(None, [os.environ.get("PYTHONPATH")])])
    out = subprocess.run([sys.executable, "-m", "kperf.testing", "interpret", name],
                         capture_output=True, text=True, env=env, timeout=timeout_s)
    if out.returncode != 0:
        raise AssertionError(f"the interpreter run of {name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _interpret_here(name: str) -> list[dict]:
    from kperf.core import checks
    from kperf.ops.registry import get_op
    from kperf.ops.targets import TARGETS

    op = get_op(name)
    if "triton" not in op.backends:
        return []
    results = []
    for target in TARGETS.values():
        for case in op.test_cases:
            for dtype in op.test_dtypes:
                item: dict[str, Any] = {"target": target.name, "case": case.name,
                                        "dtype": dtype}
                try:
                    inputs = op.make_inputs(case, dtype, "cpu", 0)
                    built = op.backend("triton", case.name).build(case, dtype, target)
                    rtol, atol = op.tolerance.get(dtype, (1e-2, 1e-2))
                    agreement = checks.compare_outputs(
                        built.fn(*inputs), op.reference(*inputs), rtol, atol,
                        f"{name}/{case.name}/{dtype}")
                    item.update(ok=True, max_abs_err=agreement.max_abs_err)
                except Exception as err:
                    item.update(ok=False, error=f"{type(err).__name__}: {err}",
                                trace=traceback.format_exc()[-1500:])
                results.append(item)
    return results


def codegen_cases(names: list[str], root: Path | None = None) -> list[tuple[str, str, str]]:
    """(op, backend, target) of every compiled backend of every op, for a test's params."""
    from kperf.ops.registry import get_op
    from kperf.ops.targets import TARGETS

    proj = project.of(root) if root else project.find()
    proj.use_working_tree()
    return [(name, backend, target) for name in names
            for backend in get_op(name, proj.ops).backends if backend in COMPILED
            for target in TARGETS]


def codegen(name: str, backend: str, target: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(artifacts, figures) of the op's first case, compiled ahead of time for ``target``
    down to a device binary (gfx942: a code object; sm_90a: a cubin)."""
    from kperf.core import hip, static
    from kperf.ops.registry import get_op
    from kperf.ops.targets import TARGETS
    from kperf.toolchains import ensure_hip_tree

    if target.startswith("gfx"):
        ensure_hip_tree()  # shipped with kperf: a project's first compile unpacks it
    op = get_op(name)
    case = op.cases[0]
    tgt = TARGETS[target]
    aot = op.backend(backend, case.name).aot(case, op.dtypes[0], tgt)
    artifacts = hip.with_code_object(aot, tgt.vendor, tgt.arch)
    return artifacts, static.figures(artifacts, tgt.vendor)


def gpu_cases(names: list[str], root: Path | None = None) -> list[tuple[str, str]]:
    """(op, backend) of every backend of every op, for a GPU test's params."""
    from kperf.ops.registry import get_op

    proj = project.of(root) if root else project.find()
    proj.use_working_tree()
    return [(name, backend) for name in names for backend in get_op(name, proj.ops).backends]


def assert_correct_on_gpu(name: str, backend: str) -> None:
    """The op's smallest case in each dtype, built on the visible GPU and checked against
    its reference as the suites check it before timing (kperf/core/prepare.py)."""
    from kperf.core.prepare import prepare
    from kperf.ops.registry import get_op
    from kperf.ops.targets import current_device_target

    op = get_op(name)
    case = min(op.cases, key=lambda c: sum(v for v in c.dims.values()))
    for dtype in op.dtypes:
        done = prepare(op, case.name, dtype, backend, current_device_target(), max_sets=2)
        assert done.agreement.mismatched == 0, (name, backend, dtype)


def assert_checked(name: str) -> None:
    found = problems(name)
    assert not found, f"op {name}: " + "; ".join(found)


def assert_interprets(name: str) -> list[dict]:
    results = interpret(name)
    failed = [r for r in results if not r["ok"]]
    assert not failed, json.dumps(failed, indent=1)[:4000]
    return results


def assert_compiles(name: str, backend: str, target: str
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
    artifacts, figures = codegen(name, backend, target)
    assert figures["registers"] > 0 and figures["occupancy"] >= 1, figures
    assert figures["occupancy_limit"], figures
    if target.startswith("gfx"):
        assert artifacts["hsaco"][:4] == b"\x7fELF", f"{name}/{backend}: no {target} code object"
        assert figures["code_bytes"] > 0 and figures["isa.instructions"] > 0, figures
    else:
        assert "cubin" in artifacts, f"{name}/{backend}: no {target} cubin"
    return artifacts, figures


if __name__ == "__main__":
    if sys.argv[1:2] == ["interpret"] and len(sys.argv) == 3:
        print(json.dumps(_interpret_here(sys.argv[2])))
        sys.exit(0)
    print("usage: python -m kperf.testing interpret OP", file=sys.stderr)
    sys.exit(2)
