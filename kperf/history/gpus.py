"""The GPUs of one host, real or stood in for (KPERF_FAKE_GPUS), and their asv machines."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kperf import machine as machine_tool
from kperf.gate.errors import GateError

FAKE_ENV = "KPERF_FAKE_GPUS"


class ShardError(GateError):
    """A condition that stops a sharded run before anything is measured (in ``shard
    gate``: exit 4 with its message, like any other error of the gate's setup)."""


@dataclass(frozen=True)
class Gpu:
    index: int  # position in NVML's / amdsmi's list (PCI order): what *_VISIBLE_DEVICES gets
    uuid: str
    model: str
    vendor: str  # nvidia | amd | fake
    serial: str = ""

    @property
    def short(self) -> str:
        return machine_tool.uuid_suffix(self.uuid)

    @property
    def label(self) -> str:
        return f"{self.index}:{self.short}"


def enumerate_gpus(environ: Mapping[str, str] | None = None) -> list[Gpu]:
    """The GPUs this host offers, read through NVML or amdsmi, never through a GPU context.

    A restriction already in the environment (CUDA_VISIBLE_DEVICES; on ROCm also
    HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES) limits the set to those GPUs.
    """
    env = os.environ if environ is None else environ
    if env.get(FAKE_ENV, "").strip():
        return parse_fake_gpus(env[FAKE_ENV])
    reasons = []
    for vendor, find in (("nvidia", _nvidia_gpus), ("amd", _amd_gpus)):
        try:
            found = find(env)
        except Exception as err:  # no driver or no library: an answer, not an error
            reasons.append(f"{vendor}: {type(err).__name__}: {err}")
            continue
        if found:
            return _unique(found)
        reasons.append(f"{vendor}: no GPU visible")
    raise ShardError("no GPU found (" + "; ".join(reasons) + f"); set {FAKE_ENV}="
                     "'uuid1,uuid2' for a dry run without GPUs")


def parse_fake_gpus(text: str) -> list[Gpu]:
    gpus = []
    for index, entry in enumerate(e.strip() for e in text.split(",")):
        uuid, _, model = entry.partition("=")
        if not uuid.strip():
            raise ShardError(f"{FAKE_ENV}={text!r}: entry {index} has no UUID")
        gpus.append(Gpu(index, uuid.strip(), model.strip() or "fake-gpu", "fake"))
    return _unique(gpus)


def _unique(gpus: list[Gpu]) -> list[Gpu]:
    for attr in ("uuid", "short"):
        seen: dict[str, Gpu] = {}
        for g in gpus:
            other = seen.setdefault(getattr(g, attr), g)
            if other is not g:
                raise ShardError(f"GPUs {other.index} ({other.uuid}) and {g.index} ({g.uuid}) "
                                 f"share the {attr} {getattr(g, attr)!r}: their asv machines "
                                 f"would have the same name")
    return gpus


def _nvidia_gpus(env: Mapping[str, str]) -> list[Gpu]:
    import pynvml as n

    def text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    n.nvmlInit()
    try:
        every = []
        for index in range(n.nvmlDeviceGetCount()):
            h = n.nvmlDeviceGetHandleByIndex(index)
            try:
                serial = text(n.nvmlDeviceGetSerial(h))
            except n.NVMLError:
                serial = ""
            every.append(Gpu(index, text(n.nvmlDeviceGetUUID(h)), text(n.nvmlDeviceGetName(h)),
                             "nvidia", serial))
    finally:
        n.nvmlShutdown()
    return visible_nvidia(every, env)


def visible_nvidia(every: list[Gpu], env: Mapping[str, str]) -> list[Gpu]:
    """The GPUs CUDA_VISIBLE_DEVICES leaves: indices in PCI bus order (as NVML counts) or
    UUIDs (a unique prefix suffices, as for CUDA)."""
    entries = [e.strip() for e in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if e.strip()]
    if "CUDA_VISIBLE_DEVICES" not in env:
        return every
    out = []
    for entry in entries:
        if entry.isdigit():
            match = [g for g in every if g.index == int(entry)]
        else:
            match = [g for g in every if g.uuid.lower().startswith(entry.lower())]
        if len(match) != 1:
            break  # CUDA stops at the first entry it cannot resolve
        out.append(match[0])
    return out


def _amd_gpus(env: Mapping[str, str]) -> list[Gpu]:
    """Through the telemetry's own amdsmi source, so the UUID text is the one the machine
    description uses, and its visibility mapping decides which GPUs are left."""
    from kperf.core.telemetry.amd import AmdSmiSource, AmdSmiUnavailable, import_amdsmi

    smi = import_amdsmi()
    smi.amdsmi_init()
    try:
        count = len(smi.amdsmi_get_processor_handles())
    finally:
        smi.amdsmi_shut_down()
    out = []
    with _environ(env):  # AmdSmiSource maps device indices through os.environ
        for k in range(count):
            try:
                source = AmdSmiSource(k)
            except AmdSmiUnavailable as err:
                if "is not visible" in str(err):
                    break
                raise
            try:
                ident = source.identity()
                out.append(Gpu(source.physical_index, str(ident.get("gpu_uuid") or ""),
                               str(ident.get("gpu") or "amd-gpu"), "amd",
                               str(ident.get("gpu_serial") or "")))
            finally:
                source.close()
    missing = [g.index for g in out if not g.uuid]
    if missing:
        raise ShardError(f"amdsmi reports no UUID for GPU(s) {missing}: cannot name them")
    return out


@contextlib.contextmanager
def _environ(env: Mapping[str, str]) -> Iterator[None]:
    if env is os.environ:
        yield
        return
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def describe_machines(gpus: Sequence[Gpu], host: str) -> dict[str, dict[str, str]]:
    """uuid -> machine-file entry, named ``<host>-<gpu model>-<uuid8>``.

    Real GPUs are described each by a child that sees only that GPU (in parallel); fake
    ones share this host's description with the GPU's fields put in.
    """
    if all(g.vendor == "fake" for g in gpus):
        base = machine_tool.describe()
        found = {g.uuid: {**base, "gpu": g.model, "gpu_uuid": g.uuid,
                          "telemetry": "fake"} for g in gpus}
    else:
        with ThreadPoolExecutor(max_workers=len(gpus)) as pool:
            infos = list(pool.map(lambda g: machine_tool.describe_gpu(g.index), gpus))
        found = {}
        for g, info in zip(gpus, infos, strict=True):
            if info.get("gpu_uuid") and info["gpu_uuid"] != g.uuid:
                raise ShardError(f"GPU {g.index}: enumerated as {g.uuid} but described as "
                                 f"{info['gpu_uuid']}: the visibility variables picked "
                                 f"another GPU")
            found[g.uuid] = {**info, "gpu_uuid": g.uuid}
    for g in gpus:
        entry = found[g.uuid]
        if g.serial and not entry.get("gpu_serial"):
            entry["gpu_serial"] = g.serial
        entry["machine"] = machine_tool.machine_name(host, entry.get("gpu") or g.model, g.uuid)
    return found
