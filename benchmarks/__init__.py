"""Benchmarks: each module prints its figures and records them as one section of ``results.json`` (see ``record``)."""
