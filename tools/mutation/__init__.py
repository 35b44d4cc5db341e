"""Maintainers' mutation tooling: hand-written mutants of the decision code and their runner."""
