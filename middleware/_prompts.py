"""The words the parent and the general-purpose child are given."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from xml.sax.saxutils import escape

from langchain_core.messages import SystemMessage

from subagents import SubagentSpec

GENERAL_PURPOSE_NAME = "general-purpose"

GENERAL_PURPOSE_DESCRIPTION = (
    "General-purpose agent for researching complex questions, searching for "
    "information and carrying out multi-step tasks. It has the same tools as you."
)

GENERAL_PURPOSE_PROMPT = """You are a subagent working on one task handed to you by another agent.

Complete the task with the tools you have. You cannot delegate: do the work yourself.
The caller sees only your final message, not your intermediate steps or tool results,
so make your final message a complete, self-contained answer to the task."""

TASK_TOOL_DESCRIPTION = """Delegate a task to a subagent that works in a fresh, isolated context.

The subagent sees only `description`, never this conversation: put every instruction,
all the context it needs and the form of the answer you want in `description`.
It returns one final answer. Choose `subagent_type` from the agents listed in
<available_agents> in your instructions. Independent tasks can run in parallel:
call this tool several times in one message."""

DELEGATION_INSTRUCTIONS = """You can delegate work to the subagents below with the `task` tool.
Each works in its own clean context and returns only its final answer."""


def available_agents_block(agents: Iterable[tuple[str, str]]) -> str:
    """The ``<available_agents>`` block: one ``- name: description`` line per agent.

    Descriptions are folded onto one line and ``<``/``>``/``&`` escaped, so no
    description can end the block early; the format costs a few characters
    per agent, which matters with large registries.
    """
    rows = [f"- {escape(name)}: {escape(' '.join(description.split()))}" for name, description in agents]
    if not rows:
        return ""
    return "<available_agents>\n" + "\n".join(rows) + "\n</available_agents>"


def with_prompt_block(request: Any, block: str) -> Any:
    """The model request with ``block`` appended to its system message."""
    if not block:
        return request
    system = request.system_message
    text = f"{system.text}\n\n{block}" if system is not None else block
    return request.override(system_message=SystemMessage(content=text))


def with_general_purpose(specs: list[Any], enabled: bool, *, taken: Iterable[str] = ()) -> list[Any]:
    """``specs`` with the ``general-purpose`` subagent first, unless off or a spec (or ``taken``) has its name."""
    if not enabled or GENERAL_PURPOSE_NAME in {*taken, *(s.name for s in specs)}:
        return specs
    general = SubagentSpec(name=GENERAL_PURPOSE_NAME, description=GENERAL_PURPOSE_DESCRIPTION,
                           system_prompt=GENERAL_PURPOSE_PROMPT)
    return [general, *specs]
