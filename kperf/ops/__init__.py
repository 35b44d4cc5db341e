"""What an op author imports: the op's contract, the targets, and the compilers' API
differences between versions (``compat``). See docs/new-op.md."""

from kperf.ops import compat
from kperf.ops.op import (
    DTYPE_BYTES,
    Backend,
    Build,
    Case,
    OpDef,
    Unsupported,
    compiled_backend,
    op_from_modules,
    seeded,
    torch_dtype,
)
from kperf.ops.targets import GFX942, SM90A, TARGETS, Target, get_target

__all__ = ["DTYPE_BYTES", "GFX942", "SM90A", "TARGETS", "Backend", "Build", "Case", "OpDef",
           "Target", "Unsupported", "compat", "compiled_backend", "get_target",
           "op_from_modules", "seeded", "torch_dtype"]
