"""The ``deep-agent`` command line (:func:`deep_agent.cli.main`): an app beside the library, which
nothing in ``middleware`` or ``subagents`` imports."""

from deep_agent.cli._app import main

__all__ = ["main"]
