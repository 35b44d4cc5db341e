"""The measurement core: timing, telemetry, correctness checks, statistics, static figures.

It never imports kernel code. It is the installed kperf's, the same for every commit
asv measures, so the instrument stays fixed while the code under test changes. Bump
METHOD_VERSION whenever a change alters what a timing means: asv then starts a new,
separately comparable series instead of mixing two methods. It is every timed suite's
asv version, and nothing else is: the gate's configuration (thresholds, subsets, a
class's placements) never starts a new series (docs/site.md, "When a series starts anew").
"""

# 2: a class's placements are part of the method, recorded with each result (version 1
# split a suite's series by a digest of its cases' placements: kperf-timing-1+placed-...)
METHOD_VERSION = "kperf-timing-2"
