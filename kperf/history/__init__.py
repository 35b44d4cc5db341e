"""Running the history: asv over commits, publish, bisect, shards over GPUs, thresholds."""
