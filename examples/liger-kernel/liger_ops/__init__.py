"""Ops that wrap Liger-Kernel's Triton kernels (https://github.com/linkedin/Liger-Kernel),
one folder each, for kperf to track Liger's own commits (README.md beside this folder).

The ops live here, in the tracking repository, and stay the same for every Liger commit
measured; Liger's package is the code under test, built from each commit
(kperf.toml ``[kperf.measured]``). Each op calls Liger's own Python entry point, so the
kernel, its launch configuration and its specialization are Liger's at that commit:
kperf compiles what that call launches (kperf/ops/capture.py)."""
