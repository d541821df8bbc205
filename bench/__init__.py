"""Benchmarks against deepagents' SubAgentMiddleware on the same scripted workloads.

Run ``python -m bench`` (``--quick`` for tiny sizes, ``--only NAME`` for one measure).
"""

from bench.suite import MEASURES, format_table, run_measures

__all__ = ["MEASURES", "format_table", "run_measures"]
