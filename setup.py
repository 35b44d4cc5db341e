"""What the kperf wheel holds (pyproject.toml has the rest): the package kperf, and the
reference ops of kernels/ as kperf.reference, the templates `kperf new-op --like` copies
from (kperf/newop.py); a package list pyproject.toml cannot write, since an op added to
kernels/ must be in the wheel without another edit."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["kperf", "kperf.*"]), "kperf.reference",
                *(f"kperf.reference.{name}" for name in find_packages("kernels"))],
      package_dir={"kperf.reference": "kernels"})
