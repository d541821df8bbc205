"""Code the tests share, imported explicitly (``from helpers.graphs import user``).

``tests/`` is on ``sys.path`` for the test run (``pythonpath`` in
``pyproject.toml``), and the tests that start a Python subprocess put it on
that process's ``PYTHONPATH``. ``tests/conftest.py`` only registers the
fixtures defined here.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
"""The ``tests/`` folder."""
REPO = TESTS.parent
"""The repository's root: the packages, ``bench/``, ``notebooks/``, ``langgraph.json``."""
FIXTURES = TESTS / "fixtures"
"""Data files the tests read: agent files (``agents/``) and skills (``skills/``)."""
