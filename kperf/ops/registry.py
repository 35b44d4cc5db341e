"""Find ops by name in the project's ops package (kperf.toml ``ops``). Importing an op is
cheap: backends import their compilers lazily.

An op is whatever ``<package>.<name>.OP`` is, read by its fields rather than its type:
commits written before an op's contract moved into kperf define an ``OpDef`` of their
own (``kernels.op``), and they are measured by the same instrument as today's.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kperf.ops.op import Unsupported

# What kperf reads of an op (kperf/ops/op.py OpDef): an OP lacking one is no op.
OP_FIELDS = ("name", "cases", "dtypes", "make_inputs", "reference", "flops", "bytes_moved",
             "backends")


class NotAnOp(TypeError):
    """``<package>/<name>/__init__.py`` defines no usable OP (the message says what lacks)."""


def ops_package() -> str:
    from kperf import project

    return project.find().ops


def get_op(name: str, package: str | None = None) -> Any:
    package = package or ops_package()
    try:
        module = importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError as err:
        if err.name in (f"{package}.{name}", package):
            raise Unsupported(f"op {name!r} does not exist at this commit (no "
                              f"{package}.{name})") from None
        raise
    op = getattr(module, "OP", None)
    missing = [f for f in OP_FIELDS if not hasattr(op, f)]
    if op is None or missing:
        raise NotAnOp(f"{package}/{name}/__init__.py must define OP: an OpDef (kperf.ops)"
                      + (f"; its OP lacks {missing}" if op is not None else ""))
    return op


def op_names(package: str | None = None) -> list[str]:
    """The op folders of the package: its sub-packages that define ``OP``."""
    package = package or ops_package()
    root = importlib.import_module(package)
    names = []
    for info in pkgutil.iter_modules(root.__path__):
        if not info.ispkg or info.name.startswith("_"):
            continue
        if getattr(importlib.import_module(f"{package}.{info.name}"), "OP", None) is not None:
            names.append(info.name)
    return sorted(names)


def class_of(op: Any, case: str) -> str:
    """A case's declared class: the case's own, else its op's ('' where none is declared;
    an op of an older contract calls it ``bound``)."""
    try:
        own = getattr(op.case(case), "klass", "")
    except Unsupported:  # a case the op does not have: its op's class
        own = ""
    return own or getattr(op, "klass", "") or getattr(op, "bound", "")


def pr_dtypes(op: Any) -> list[str]:
    """The dtypes of the op's PR-subset cases: its ``pr_dtypes``, else its first dtype."""
    return list(getattr(op, "pr_dtypes", ()) or list(op.dtypes)[:1])


def pr_cases(op: Any) -> list[str]:
    return [c.name for c in op.cases if getattr(c, "pr", False)]


@dataclass(frozen=True)
class Declared:
    """What the ops of a package declare for the gate and the history."""

    classes: dict[tuple[str, str], str]  # (op, case) -> its class ('': none declared)
    pr: list[tuple[str, str, str, tuple[str, ...]]]  # PR subset: (op, case, dtype, backends)
    ops: dict[str, str] = field(default_factory=dict)  # op -> its own class (its cases' default)


def declarations(package: str | None = None) -> Declared:
    """Every op's declared classes and PR-subset cases, as this process imports them."""
    classes: dict[tuple[str, str], str] = {}
    pr: list[tuple[str, str, str, tuple[str, ...]]] = []
    own: dict[str, str] = {}
    for name in op_names(package):
        op = get_op(name, package)
        own[name] = getattr(op, "klass", "") or getattr(op, "bound", "")
        compiled = tuple(b for b in op.backends if b != getattr(op, "baseline", "torch"))
        for case in op.cases:
            classes[(name, case.name)] = class_of(op, case.name)
        pr += [(name, case, dtype, compiled) for case in pr_cases(op) for dtype in pr_dtypes(op)]
    return Declared(classes, pr, own)


def working_tree_declarations(root: Path | None = None) -> Declared:
    """The declarations of a project's ops as its working tree has them (the tools read
    them there, like the benchmark files): kperf.toml's project at ``root``, else the
    current one."""
    from kperf import project

    proj = project.find() if root is None else project.load(root)
    proj.use_working_tree()
    return declarations(proj.ops)
