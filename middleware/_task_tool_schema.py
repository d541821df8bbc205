"""The ``task`` tool's arguments with a per-call ``output_schema`` (``structured_results=True``).

``task`` stays ``(description, subagent_type)`` by default. With
``SubAgentMiddleware(structured_results=True)`` it also accepts an optional
``output_schema``, a JSON Schema object the child's answer must match for
that call only (see :mod:`subagents._call_schema`).

Example::

    task(description="Rate the plan", subagent_type="reviewer",
         output_schema={"type": "object", "title": "Rating",
                        "properties": {"score": {"type": "integer"}}, "required": ["score"]})
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from middleware._prompts import TASK_TOOL_DESCRIPTION
from middleware._task_tool import TaskToolInput


class TaskToolInputWithSchema(TaskToolInput):
    """Arguments of the ``task`` tool, with a per-call output schema."""

    output_schema: dict[str, Any] | None = Field(
        default=None,
        description=(
            "Optional. A JSON Schema object (\"type\": \"object\") the subagent's answer must "
            "match, for this call only; you receive the answer as JSON. Omit for a text answer."
        ),
    )


STRUCTURED_TASK_TOOL_DESCRIPTION = (
    TASK_TOOL_DESCRIPTION
    + "\nTo get a typed answer, pass `output_schema` (a JSON Schema object); the answer comes back "
    "as JSON matching it, or as an error naming what did not match."
)


def task_tool_arguments(structured_results: bool) -> tuple[type[TaskToolInput], str]:
    """The ``task`` tool's argument schema and description."""
    if structured_results:
        return TaskToolInputWithSchema, STRUCTURED_TASK_TOOL_DESCRIPTION
    return TaskToolInput, TASK_TOOL_DESCRIPTION
