"""``python -m kperf``: the ``kperf`` command."""

import sys

from kperf.cli import main

sys.exit(main())
