"""Tiny random pipelines of each architecture, for tests and benchmarks (never the app)."""
