"""Running the history: asv over commits, publish, bisect, thresholds."""
