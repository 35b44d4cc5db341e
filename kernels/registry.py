"""Find ops by name. Importing an op package is cheap: backends import compilers lazily."""

from __future__ import annotations

import importlib
import pkgutil

import kernels
from kernels.op import OpDef, Unsupported


def get_op(name: str) -> OpDef:
    try:
        module = importlib.import_module(f"kernels.{name}")
    except ModuleNotFoundError as err:
        if err.name in (f"kernels.{name}", "kernels"):
            raise Unsupported(f"op {name!r} does not exist at this commit") from None
        raise
    op = getattr(module, "OP", None)
    if not isinstance(op, OpDef):
        raise TypeError(f"kernels/{name}/__init__.py must define OP: OpDef")
    return op


def op_names() -> list[str]:
    return sorted(
        m.name
        for m in pkgutil.iter_modules(kernels.__path__)
        if m.ispkg and not m.name.startswith("_")
    )
