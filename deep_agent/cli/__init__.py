"""The ``deep-agent`` command line (:func:`deep_agent.cli.app.main`): an app beside the library, which
nothing in ``middleware`` or ``subagents`` imports."""

from deep_agent.cli.app import main

__all__ = ["main"]
