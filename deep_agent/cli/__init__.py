"""The ``deep-agent`` command line: an app beside the library.

Its entry point is :func:`deep_agent.cli.app.main`; nothing in ``middleware`` or
``subagents`` imports this package.
"""

from deep_agent.cli.app import main

__all__ = ["main"]
