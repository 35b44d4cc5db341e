"""Command-line tools of the harness (run as ``python -m tools.<name>``)."""
