"""Benchmarks. Each reports ratios against a baseline measured in the same run."""
