"""``kperf check``: every op of the project declares what the gate and the history need,
and its ``benchmarks/bench_<op>.py`` names exactly its cases, dtypes and backends.

    kperf check              # every op; exit 1 naming each problem
    kperf check rope         # one op
    kperf check --write rope # write benchmarks/bench_rope.py from the op (docs/new-op.md)

The benchmark file is the op's declaration written out as literals (asv discovers a
suite once, in one commit's environment: DESIGN.md rule 2), so it must follow the op;
the project's test runs the same check (kperf/testing.py).
"""

from __future__ import annotations

import argparse
import sys

from kperf import benchfile, project, testing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ops", nargs="*", help="ops to check (default: every op)")
    parser.add_argument("--write", action="store_true",
                        help="write each op's benchmark file from its declaration first")
    args = parser.parse_args(argv)
    try:
        proj = project.find()
        names = args.ops or testing.ops()
        if args.write:
            for name in names:
                print(f"written: {write_bench_file(proj, name)}")
        bad = {name: found for name in names if (found := testing.problems(name))}
    except (project.ProjectError, ImportError) as err:
        print(f"kperf check: {err}", file=sys.stderr)
        return 2
    for name, found in bad.items():
        for problem in found:
            print(f"{name}: {problem}", file=sys.stderr)
    print(f"kperf check: {len(names) - len(bad)} of {len(names)} ops in order")
    return 1 if bad else 0


def write_bench_file(proj: project.Project, name: str, doc: str = "") -> str:
    """``benchmarks/bench_<name>.py`` written from the op's declaration, its docstring the
    first paragraph of the op's own; where the file exists, its codegen case (while still
    a case of the op) is kept: the codegen series go on."""
    import dataclasses
    import importlib

    from kperf.core.worker import register_package
    from kperf.ops.registry import get_op

    proj.use_working_tree()
    path = proj.root / "benchmarks" / f"bench_{name}.py"
    if not doc:  # the op's own first paragraph
        doc = (importlib.import_module(f"{proj.ops}.{name}").__doc__ or "").strip()
        doc = " ".join(doc.split("\n\n")[0].split())
    spec = benchfile.spec_of_op(get_op(name, proj.ops), " ".join(doc.split()))
    if path.is_file():
        if "benchmarks" not in sys.modules:
            register_package(proj.root / "benchmarks" / "__init__.py")
        try:
            old = benchfile.read(importlib.import_module(f"benchmarks.bench_{name}"))
        except Exception as err:
            print(f"kperf check: {path.name} does not import ({type(err).__name__}: {err}); "
                  f"written from the op", file=sys.stderr)
            old = None
        if old is not None and old.codegen_case in spec.cases:  # its codegen series go on
            spec = dataclasses.replace(spec, codegen_case=old.codegen_case,
                                       codegen_dtypes=old.codegen_dtypes)
    path.parent.mkdir(exist_ok=True)
    path.write_text(benchfile.render(spec))
    sys.modules.pop(f"benchmarks.bench_{name}", None)  # read again as written
    importlib.invalidate_caches()
    return str(path.relative_to(proj.root))


if __name__ == "__main__":
    sys.exit(main())
