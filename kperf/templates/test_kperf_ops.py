"""kperf's checks of every op of this repository (``kperf init`` wrote this file): each
op's declaration and its benchmark file in step, its Triton kernels under Triton's
interpreter on the CPU against its reference, and both languages compiled for every
target down to a device binary; on a machine with a GPU, each backend's output checked
against the reference there. A new op folder is covered by adding it."""

import pytest

from kperf import testing

OPS = testing.ops()


@pytest.mark.parametrize("op", OPS)
def test_declared_and_in_step(op: str) -> None:
    testing.assert_checked(op)


@pytest.mark.parametrize("op", OPS)
def test_triton_interpreter(op: str) -> None:
    testing.assert_interprets(op)


@pytest.mark.parametrize(("op", "backend", "target"), testing.codegen_cases(OPS))
def test_codegen(op: str, backend: str, target: str) -> None:
    testing.assert_compiles(op, backend, target)


def _gpu() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(not _gpu(), reason="needs a CUDA or ROCm GPU")
@pytest.mark.parametrize(("op", "backend"), testing.gpu_cases(OPS))
def test_correct_on_the_gpu(op: str, backend: str) -> None:
    testing.assert_correct_on_gpu(op, backend)
