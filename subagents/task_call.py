"""One ``task`` call as a delegation tool received it.

Example::

    call = TaskCall.from_runtime(runtime, "researcher", "Find X", parent_model=model)
    command = runner.run(call)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Emit = Callable[[dict[str, Any]], None]


@dataclasses.dataclass(frozen=True)
class TaskCall:
    """One ``task`` call as the parent's tool received it."""

    subagent_type: str
    description: str
    parent_state: Mapping[str, Any]
    tool_call_id: str | None
    parent_config: Mapping[str, Any]
    parent_model: Any = None
    parent_tools: Sequence[Any] = ()
    emit: Emit | None = None
    """Where lifecycle events go (the parent's ``custom`` stream writer)."""
    store: Any = None
    """The parent's ``BaseStore``, for the store transcript sink."""
    output_schema: Any = None
    """A per-call output schema (``task``'s ``output_schema``; see subagents/call_schema.py)."""

    @classmethod
    def from_runtime(
        cls,
        runtime: Any,
        subagent_type: str,
        description: str,
        *,
        parent_model: Any,
        parent_tools: Sequence[Any] | None = None,
        output_schema: Any = None,
    ) -> TaskCall:
        """The call a delegation tool received, from its ``ToolRuntime``.

        ``parent_tools`` defaults to the tools of the parent's tool node.
        """
        return cls(
            subagent_type=subagent_type,
            description=description,
            parent_state=runtime.state,
            tool_call_id=runtime.tool_call_id,
            parent_config=runtime.config,
            parent_model=parent_model,
            parent_tools=runtime.tools if parent_tools is None else parent_tools,
            emit=runtime.stream_writer,
            store=runtime.store,
            output_schema=output_schema,
        )
