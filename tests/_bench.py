"""What the CPU runs of the timed suites share (the ``cpu_bench`` fixture, tests/conftest.py)."""

BENCH_PLAN = {"trials": 3, "min_trial_s": 0.01, "min_reps": 2, "warmup_min_s": 0,
              "warmup_max_s": 0, "energy_s": 0}
BENCH_CASE = ("test-ragged", "fp16", "triton")  # gemm's small CPU case: M 96, N 80, K 72
