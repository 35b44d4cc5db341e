"""kperf: performance-regression tracking for TileLang and Triton GPU kernels, on asv.

The parts (docs/architecture.md): ``core`` measures (timing, telemetry, statistics, static
figures; it never imports the code under test), ``ops`` is the op contract an op author
writes against, ``suites`` are the asv suites a project's ``benchmarks/`` makes from it,
and ``gate``, ``site``, ``history`` and ``stacks`` are the tools behind the ``kperf``
command (``cli``). Importing it costs nothing and never touches a GPU.
"""

__version__ = "0.2.0"
