"""The published site: asv's pages made to work offline, kperf's pages, and publish."""
