import sys

from kperf.gate.cli import main

sys.exit(main())
