"""asv suites of this repository's ops: one ``bench_<op>.py`` each (``kperf new-op`` writes
it). asv reads this folder from the working tree for every commit it measures; kperf, the
measuring code, comes from the stack and is the same for every commit; the code under test
comes from the package asv installed for the commit (kperf.toml). Nothing here may touch
the GPU: asv may import the suite in a fork server before any benchmark runs."""

from kperf.suites import benchmarks_package

benchmarks_package(__file__)
