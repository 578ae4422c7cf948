"""Benchmark scripts (run as files) and the checks they share with the tests."""
