"""Scripted models for ``deep-agent run`` with background children that ask for approval.

Used as ``--model scripted:cli_background_scripts:NAME``.
"""

from __future__ import annotations

from langchain_core.messages import ToolMessage

from deep_agent._testing import ScriptedChatModel, tool_call

STARTED = "Started two background edits of notes.txt."


def _what_the_tool_said(messages):
    said = next((m.text for m in reversed(messages) if isinstance(m, ToolMessage)), "(no tool result)")
    return f"The edit came back with: {said}"


def _edits() -> list:
    return [
        ("Fix the typo", [{"tool_calls": [tool_call("Edit", file_path="notes.txt",
                                                     old_string="teh", new_string="the")]},
                          _what_the_tool_said]),
        ("Rewrite the notes", [{"tool_calls": [tool_call("Edit", file_path="notes.txt",
                                                          old_string="notes", new_string="NOTES")]},
                               _what_the_tool_said]),
    ]


def background_edits() -> ScriptedChatModel:
    """The root starts two background editors; each wants one ``Edit``."""
    return ScriptedChatModel(
        rules=_edits(),
        responses=[
            {"tool_calls": [
                tool_call("start_async_task", description="Fix the typo in notes.txt.", subagent_type="editor"),
                tool_call("start_async_task", description="Rewrite the notes in capitals.",
                          subagent_type="editor"),
            ]},
            STARTED,
        ],
        default=STARTED,
        latency_s=0.2,
    )


def one_background_edit() -> ScriptedChatModel:
    """The root starts one background editor that wants one ``Edit``."""
    return ScriptedChatModel(
        rules=_edits(),
        responses=[
            {"tool_calls": [tool_call("start_async_task", description="Fix the typo in notes.txt.",
                                      subagent_type="editor")]},
            "Started one background edit of notes.txt.",
        ],
        default="Started one background edit of notes.txt.",
        # As in background_edits: the child's turn ends after the root's, so the root
        # never sees (and, being scripted on the same rules, never acts on) its notice.
        latency_s=0.2,
    )
