"""Correctness gate run before any timing: a wrong or NaN result fails the case."""

from __future__ import annotations

from dataclasses import dataclass


class WrongResult(AssertionError):
    """The kernel's output disagrees with the reference (or holds NaN/Inf)."""

    worker_survives = True  # a wrong answer leaves the GPU context usable (harness/worker.py)


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
