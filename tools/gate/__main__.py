import sys

from tools.gate.cli import main

sys.exit(main())
