"""The stand-in's discovery (tests/fake_asv): a suite of no benchmark, as asv's
``benchmark.py discover`` would write it for an empty ``benchmarks/``."""

from pathlib import Path

BENCHMARK_RUN_SCRIPT = str(Path(__file__).with_name("discover_script.py"))
