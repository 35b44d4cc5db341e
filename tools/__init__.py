"""kperf's tools by the product's parts (``python -m tools.<part>.<name>``) over a shared floor."""
