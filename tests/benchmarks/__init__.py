"""Tests of the checks the benchmarks rely on."""
