"""The measurement core: timing, telemetry, correctness checks, statistics, static figures.

It never imports kernel code. asv loads it from the working tree for every commit
(see benchmarks/__init__.py), so the instrument stays fixed while the code under test
changes. Bump METHOD_VERSION whenever a change alters what a timing means: asv then
starts a new, separately comparable series instead of mixing two methods.
"""

METHOD_VERSION = "kperf-timing-1"
