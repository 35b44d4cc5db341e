"""asv suites of this repository's ops: one ``bench_<op>.py`` each
(``kperf new-op`` writes it; ``kperf check`` keeps it in step with its op). asv reads this
folder from the working tree for every commit it measures; kperf, the measuring code, is
the installed one."""

from kperf.suites import benchmarks_package

benchmarks_package(__file__)
