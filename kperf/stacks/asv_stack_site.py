"""Link the prepared stack (torch, Triton, TileLang, SMI bindings) into an asv environment.

asv's install_command runs this with the environment's Python. It writes a ``.pth`` into
the environment's site-packages that appends the stack's site directories to sys.path.
``VIRTUALENV_SYSTEM_SITE_PACKAGES`` cannot do this when the stack lives in its own venv
(virtualenv builds on the base interpreter), and ``ASV_PYTHONPATH`` alone reaches pip but
is removed from ``sys.path`` in the benchmark processes (docs/facts.md). Appending
keeps the commit's own ``kernels`` wheel first on the path.

The directories come from ``KPERF_STACK_SITE`` (os.pathsep-separated), else from
``PYTHONPATH`` (which asv sets from ``ASV_PYTHONPATH``).
"""

from __future__ import annotations

import os
import site
import sys
from pathlib import Path

PTH_NAME = "zz_kperf_stack.pth"


def main() -> int:
    raw = os.environ.get("KPERF_STACK_SITE") or os.environ.get("PYTHONPATH", "")
    dirs = [d for d in raw.split(os.pathsep) if d]
    missing = [d for d in dirs if not Path(d).is_dir()]
    if missing:
        print(f"asv_stack_site: stack directories do not exist: {missing}", file=sys.stderr)
        return 1
    target = Path(site.getsitepackages()[0]) / PTH_NAME
    if not dirs:
        target.unlink(missing_ok=True)
        print("asv_stack_site: no stack directories given; environment uses its own packages")
        return 0
    target.write_text(f"import sys; sys.path.extend({dirs!r})\n")
    print(f"asv_stack_site: {target} -> {dirs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
