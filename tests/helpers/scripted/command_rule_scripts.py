"""Scripted models for agent files' ``Bash(...)`` rules: ``--model scripted:command_rule_scripts:NAME``."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, ToolMessage

from deep_agent._testing import ScriptedChatModel, tool_call

RULED_COMMANDS = ["git diff; touch chained.txt", "touch plain.txt", "git diff --stat > diff.txt",
                  "git diff --stat"]
"""What the ``differ`` agent (``tools: Read, Bash(git diff:*)``) tries, in order."""


def _tool_results(messages: list[BaseMessage]) -> str:
    return "\n".join(f"RESULT: {m.text}" for m in messages if isinstance(m, ToolMessage)) or "no results"


def differ() -> ScriptedChatModel:
    """The root asks the ``differ`` agent for the diff; it tries :data:`RULED_COMMANDS` and quotes the results."""
    return ScriptedChatModel(
        rules=[("Show the diff", [*({"tool_calls": [tool_call("Bash", command=command)]}
                                    for command in RULED_COMMANDS), _tool_results])],
        responses=[
            {"tool_calls": [tool_call("task", description="Show the diff of the project.", subagent_type="differ")]},
            _tool_results,
        ],
    )
