"""Kernels under test: one sub-package per op (TileLang, Triton, PyTorch reference, spec).

Nothing here is imported eagerly: importing ``kernels`` must stay cheap and must never
touch the GPU, because asv may import it in a fork server before any benchmark runs.
"""

__version__ = "0.1.0"
