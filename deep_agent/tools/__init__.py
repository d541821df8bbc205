"""The command line's built-in tools, under the names agent files use: ``Read``, ``Write``, ``Edit``, ``Glob``,
``Grep``, ``LS`` and ``Bash``, with Claude Code's argument names, confined to a :class:`Workspace`. Agent files that
say ``tools: Read, Grep, Edit`` get exactly these.

Example::

    from deep_agent.tools import RISKY_TOOLS, builtin_tools

    tools = builtin_tools(".")   # Bash in bubblewrap's sandbox; none where bwrap is missing
    agent = create_deep_agent(model, tools, settings=DelegationSettings.of(permission_mode="confirm_risky",
                                                                           risky_tools=RISKY_TOOLS))
"""

from deep_agent.tools._catalog import BUILTIN_TOOL_NAMES, RISKY_TOOLS, builtin_tools, tools_not_provided
from deep_agent.tools._workspace import MAX_OUTPUT_CHARS, Workspace

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "MAX_OUTPUT_CHARS",
    "RISKY_TOOLS",
    "Workspace",
    "builtin_tools",
    "tools_not_provided",
]
