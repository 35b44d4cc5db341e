"""The CI workflows of a kperf project, rendered from kperf's templates
(kperf/templates/workflows/): the PR gate's two stages (``perf-gate.yml``: the CPU codegen
job on a GitHub-hosted runner; ``perf-gate-run.yml``: the GPU gate on just-in-time
self-hosted runners and the one PR comment) and the nightly history (``perf-nightly.yml``),
with ``.github/scripts/perf-gate.js``. kperf's own repository's workflows are renderings
of the same templates (tests/test_teams.py keeps them in step), so the security design of
docs/security.md is the same in every project.

``kperf init`` writes them for a team: the CPU codegen job always (its runner is GitHub's);
the GPU workflows only where every GPU runner is given an image pinned by digest
(``--gpu-image gfx942=rocm/pytorch:...@sha256:<64 hex>``): a workflow whose image is not
pinned refuses to run, so init refuses to write one.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).resolve().parent / "templates" / "workflows"
SCRIPT = Path(__file__).resolve().parent / "templates" / "perf-gate.js"
PINNED = re.compile(r"^[a-z0-9./_:-]+@sha256:[0-9a-f]{64}$")
GPU_OPTIONS = {"amd": "--device=/dev/kfd --device=/dev/dri --group-add video",
               "nvidia": "--gpus all"}
PLACEHOLDER = 'PLACEHOLDER digest, to be pinned (docs/security.md, "Images")'
# kperf's own runners: the images are not pinned yet (docs/security.md, "Images")
SELF_RUNNERS = (("gfx942", "rocm/pytorch:rocm6.4.1_ubuntu24.04_py3.12_pytorch_release_2.6.0"
                           "@sha256:PIN-ME"),
                ("sm_90", "nvcr.io/nvidia/pytorch:25.01-py3@sha256:PIN-ME"))


class WorkflowError(ValueError):
    """A workflow that could not run (an unpinned image, a bad label): not written."""


@dataclass(frozen=True)
class Runner:
    label: str  # the runner label and the report's section: gfx942, sm_90, mi300x, ...
    image: str  # the GPU image, pinned by digest
    vendor: str  # amd | nvidia: the container's GPU options

    def context(self) -> dict[str, Any]:
        comment = [] if PINNED.fullmatch(self.image) else [PLACEHOLDER]
        return {"label": self.label, "image": self.image, "gpu": GPU_OPTIONS[self.vendor],
                "comment": comment}


def runner(text: str) -> Runner:
    """``LABEL=IMAGE@sha256:...``; the vendor from the label (gfx*: amd, sm_*: nvidia) or
    from ``LABEL:VENDOR=``."""
    label, sep, image = text.partition("=")
    label, _, vendor = label.partition(":")
    if not sep or not re.fullmatch(r"[a-z0-9_-]+", label):
        raise WorkflowError(f"--gpu-image {text!r}: expected LABEL=IMAGE@sha256:<digest>, "
                            f"e.g. gfx942=rocm/pytorch:rocm7.0@sha256:...")
    vendor = vendor or ("amd" if label.startswith(("gfx", "mi")) else
                        "nvidia" if label.startswith(("sm_", "h100", "h200")) else "")
    if vendor not in GPU_OPTIONS:
        raise WorkflowError(f"--gpu-image {text!r}: say which GPU vendor: "
                            f"{label}:amd=... or {label}:nvidia=...")
    if not PINNED.fullmatch(image):
        raise WorkflowError(f"--gpu-image {text!r}: the image must be pinned by digest "
                            f"(...@sha256:<64 hex digits>): the gate refuses to run any other "
                            f"(docs/security.md, 'Images')")
    return Runner(label, image, vendor)


def render(name: str, context: dict[str, Any]) -> str:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), block_start_string="{%",
        block_end_string="%}", variable_start_string="{@", variable_end_string="@}",
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined, autoescape=False)
    return env.get_template(name).render(**context)


def _tools(requirements: list[str]) -> str:
    return " ".join(f'"{r}"' for r in requirements)


def self_context() -> dict[str, Any]:
    """kperf's own repository: set up by tools/setup_env.sh, kperf from the checkout."""
    import importlib.metadata

    deps = [r.replace(" ", "") for r in importlib.metadata.requires("kperf") or []
            if "extra ==" not in r]
    runners = [Runner(label, image, "amd" if label.startswith("gfx") else "nvidia")
               for label, image in SELF_RUNNERS]
    return {"own": True, "branch": "main", "setup_doc": "tools/setup_env.sh",
            "kperf": ".venv/bin/kperf",
            "runners": [r.context() for r in runners],
            "labels": json.dumps([r.label for r in runners]), "tools": _tools(deps),
            "kperf_requirement": "", "torch": "", "stack": ""}


def team_context(runners: list[Runner], kperf_requirement: str, stack: list[str],
                 branch: str = "main") -> dict[str, Any]:
    torch = [r for r in stack if r.split("=")[0].strip() == "torch"]
    rest = [r for r in stack if r not in torch]
    return {"own": False, "branch": branch, "setup_doc": "kperf's docs/teams.md",
            "kperf": "kperf",
            "runners": [r.context() for r in runners],
            "labels": json.dumps([r.label for r in runners]),
            "tools": _tools([kperf_requirement]), "kperf_requirement": f'"{kperf_requirement}"',
            "torch": _tools(torch), "stack": _tools(rest)}


def all_files(root: Path, context: dict[str, Any], gpu: bool) -> dict[Path, str]:
    """{path: text}: the gate's stage 1 always; stage 2, the nightly and the report script
    with GPU runners (``gpu``)."""
    out = {root / ".github" / "workflows" / "perf-gate.yml": render("perf-gate.yml", context)}
    if gpu:
        for name in ("perf-gate-run.yml", "perf-nightly.yml"):
            out[root / ".github" / "workflows" / name] = render(name, context)
        out[root / ".github" / "scripts" / "perf-gate.js"] = SCRIPT.read_text()
    return out


def default_requirement() -> str:
    """How a runner installs this kperf: the git URL and commit it was installed from
    (pip's direct_url.json), else its version."""
    import importlib.metadata

    dist = importlib.metadata.distribution("kperf")
    direct = dist.read_text("direct_url.json")
    if direct:
        info = json.loads(direct)
        vcs = info.get("vcs_info") or {}
        if vcs.get("vcs") == "git" and vcs.get("commit_id"):
            return f"kperf @ git+{info['url']}@{vcs['commit_id']}"
    return f"kperf=={dist.version}"


def default_stack() -> list[str]:
    """The CPU stack the codegen job installs: kperf's own pins of torch, Triton,
    TileLang and their companions (pyproject.toml's ``stack`` extra)."""
    import importlib.metadata

    reqs = importlib.metadata.requires("kperf") or []
    return [r.split(";")[0].replace(" ", "") for r in reqs if 'extra == "stack"' in r]


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpu-image", action="append", metavar="LABEL=IMAGE@sha256:...",
                        help="a GPU runner of the gate and the nightly and its image, pinned "
                             "by digest (repeatable); without one, only the CPU codegen "
                             "workflow is written")
    parser.add_argument("--kperf-requirement",
                        help="how the runners install kperf (default: the git URL and "
                             "commit this kperf was installed from, else its version)")
    parser.add_argument("--stack", nargs="+", metavar="REQ",
                        help="the CPU stack of the codegen job (default: kperf's pins of "
                             "torch, triton, tilelang, apache-tvm-ffi)")
    parser.add_argument("--no-workflows", action="store_true", help="write no workflow")


def files(root: Path, args: argparse.Namespace, branch: str) -> dict[Path, str]:
    """The workflow files ``kperf init`` writes for ``args`` (``add_options``)."""
    if args.no_workflows:
        return {}
    runners = [runner(text) for text in args.gpu_image or []]
    context = team_context(runners, args.kperf_requirement or default_requirement(),
                           args.stack or default_stack(), branch)
    return all_files(root, context, gpu=bool(runners))
