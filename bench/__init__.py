"""Benchmarks against deepagents' SubAgentMiddleware on the same scripted workloads.

Run ``python -m bench`` (``--quick`` for tiny sizes, ``--only NAME`` for one measure).
"""

from typing import Any

__all__ = ["MEASURES", "format_table", "run_measures"]


def __getattr__(name: str) -> Any:
    """The suite's names, imported when first asked for: a process that runs one part of the bench (the counted
    runs under cachegrind, some 50 times slower) imports that part, not every measure."""
    if name in __all__:
        from bench import suite

        return getattr(suite, name)
    raise AttributeError(f"module 'bench' has no attribute {name!r}")
