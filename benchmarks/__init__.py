"""Benchmarks: each module prints its figures and saves them under ``benchmarks/results/``."""
