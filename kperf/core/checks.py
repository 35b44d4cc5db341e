"""Correctness gate run before any timing: a wrong or NaN result fails the case."""

from __future__ import annotations

from dataclasses import dataclass


class WrongResult(AssertionError):
    """The kernel's output disagrees with the reference (or holds NaN/Inf)."""

    worker_survives = True  # a wrong answer leaves the GPU context usable (kperf/core/worker.py)


@dataclass(frozen=True)
class Agreement:
    max_abs_err: float
    max_rel_err: float
    mismatched: int
    total: int


def compare(out, ref, rtol: float, atol: float, what: str = "output") -> Agreement:
    """Compare in fp32; raise ``WrongResult`` naming the case on NaN, Inf or mismatch."""
    import torch

    got = out.detach().float()
    want = ref.detach().float().to(got.device)
    if got.shape != want.shape:
        raise WrongResult(f"{what}: shape {tuple(got.shape)} != reference {tuple(want.shape)}")
    bad = ~torch.isfinite(got)
    if bool(bad.any()):
        raise WrongResult(f"{what}: {int(bad.sum())} of {got.numel()} values are NaN or Inf")
    diff = (got - want).abs()
    allowed = atol + rtol * want.abs()
    mismatched = int((diff > allowed).sum())
    result = Agreement(
        max_abs_err=float(diff.max()) if diff.numel() else 0.0,
        max_rel_err=float((diff / want.abs().clamp_min(atol)).max()) if diff.numel() else 0.0,
        mismatched=mismatched,
        total=got.numel(),
    )
    if mismatched:
        raise WrongResult(
            f"{what}: {mismatched} of {got.numel()} values outside rtol={rtol} atol={atol} "
            f"(max abs err {result.max_abs_err:.3g})"
        )
    return result


def compare_outputs(out, ref, rtol: float, atol: float, what: str = "output") -> Agreement:
    """``compare`` for a kernel that returns several tensors (a tuple or list, or a dict by
    name), each against the reference's tensor in the same place; one tensor otherwise.
    The agreement returned is the worst of them."""
    if isinstance(ref, dict):
        if not isinstance(out, dict) or set(out) != set(ref):
            raise WrongResult(f"{what}: outputs {_names(out)} != reference {_names(ref)}")
        pairs = [(out[k], ref[k], f"{what}[{k!r}]") for k in sorted(ref)]
    elif isinstance(ref, (tuple, list)):
        if not isinstance(out, (tuple, list)) or len(out) != len(ref):
            raise WrongResult(f"{what}: {_names(out)} outputs, the reference has {len(ref)}")
        pairs = [(o, r, f"{what}[{i}]") for i, (o, r) in enumerate(zip(out, ref, strict=True))]
    else:
        return compare(out, ref, rtol, atol, what)
    found = [compare(o, r, rtol, atol, name) for o, r, name in pairs]
    return Agreement(max(a.max_abs_err for a in found), max(a.max_rel_err for a in found),
                     sum(a.mismatched for a in found), sum(a.total for a in found))


def _names(value) -> str:
    if isinstance(value, dict):
        return str(sorted(value))
    if isinstance(value, (tuple, list)):
        return str(len(value))
    return "1 tensor"
