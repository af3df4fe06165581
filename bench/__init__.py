"""Benchmarks: run one with ``python -m bench.<name>``; each prints ratios measured side by side."""
