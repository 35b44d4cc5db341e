"""Stacks: one commit under other Triton, TileLang and ROCm toolchains; machines; bundles."""
