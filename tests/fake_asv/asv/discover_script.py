"""``discover BENCHMARK_DIR OUT``: writes an empty suite to OUT (tests/fake_asv)."""

import json
import sys

if sys.argv[1:2] == ["discover"]:
    with open(sys.argv[3], "w") as out:
        json.dump([], out)
