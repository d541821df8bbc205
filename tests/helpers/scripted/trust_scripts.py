"""Scripted models that answer with terminal escape sequences: ``--model scripted:trust_scripts:NAME``."""

from __future__ import annotations

from deep_agent._testing import ScriptedChatModel, tool_call

HOSTILE = ("first line\n"
           "\x1b[2J\x1b[H"                                   # clear the screen, cursor home
           "\x1b]52;c;ZWNobyBwd25lZA==\x07"                  # OSC 52: write the clipboard
           "\x1b]8;;http://evil.example/\x1b\\docs\x1b]8;;\x1b\\"  # OSC 8: a link whose target is hidden
           "\x9b31m"                                         # a one-byte CSI (C1)
           "\x07bell\x08\x08back\rover\u202eflipped\tend")
"""An answer with every kind of sequence a terminal would act on; its newline and tab are the model's own."""

RAW = ("\x1b", "\x07", "\x08", "\r", "\x9b", "\u202e")
"""Characters none of which may reach the terminal raw."""


def hostile_root() -> ScriptedChatModel:
    """The root answers at once with :data:`HOSTILE`."""
    return ScriptedChatModel(responses=[HOSTILE], default=HOSTILE)


HOSTILE_AGENT = "x\x1b]52;c;ZWNobyBwd25lZA==\x07[bold]y"
"""A subagent type no agent has: the call is refused, and its name is shown in the tree and the summary."""


def hostile_agent_name() -> ScriptedChatModel:
    """The root delegates to :data:`HOSTILE_AGENT` (refused: unknown), then answers plainly."""
    return ScriptedChatModel(
        responses=[{"tool_calls": [tool_call("task", description="d", subagent_type=HOSTILE_AGENT)]}, "Done."],
        default="Done.",
    )
