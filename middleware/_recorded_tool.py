"""The ``task`` tool's type: a call whose arguments do not validate answers with a record.

LangGraph's tool node answers a call whose arguments fail the tool's schema
with an error ``ToolMessage`` (``Error invoking tool 'task' with kwargs ...
Please fix the error and try again.``), so the model can retry. A delegation
must also leave a ledger record (``stop_reason="invalid_call"``), which only
a state update carries. :class:`RecordedTool` turns that validation error
into the same message plus the record, inside the tool itself: a
``wrap_tool_call`` hook would do it too, but LangChain runs every such hook
(in a LangSmith span) around every tool call of the parent, not just
``task``'s. A ``task`` call another middleware answers without calling the
tool (a human's rejection, a tool-call limit, a policy) gets that
middleware's answer and no record: no delegation was attempted.

Example::

    tool = RecordedTool.from_function(func=task, coroutine=atask, name="task", args_schema=TaskToolInput,
                                      infer_schema=False)
    tool.invoke({"name": "task", "args": {}, "id": "call_1", "type": "tool_call"})  # a Command
"""

from __future__ import annotations

from typing import Any, cast

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool
from langgraph.prebuilt.tool_node import ToolInvocationError
from langgraph.types import Command
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from middleware._invalid_calls import invalid_call_record
from middleware._ledger import LEDGER_KEY
from middleware._ledger_entry import ledger_entry
from subagents import safe_text

try:
    from langgraph.errors import is_invalid_resume
except ImportError:  # a langgraph without `interrupt(response_schema=...)` raises no such error
    def is_invalid_resume(error: BaseException) -> bool:
        return False

MAX_ARGUMENT_DEPTH = 200
"""Arguments nested deeper than this are refused before LangChain reads them (its ``str()`` of them recurses)."""

_INJECTED = frozenset({"runtime"})
"""Arguments the tool node adds to the model's: never shown back to the model as its own."""


class RecordedTool(StructuredTool):
    """A ``StructuredTool`` whose tool calls with invalid arguments return an error result and a record."""

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if (refused := self._too_deep(input)) is not None:
            return refused
        try:
            return super().invoke(input, config, **kwargs)
        except ValidationError as exc:
            return self._invalid(input, exc)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if (refused := self._too_deep(input)) is not None:
            return refused
        try:
            return await super().ainvoke(input, config, **kwargs)
        except ValidationError as exc:
            return self._invalid(input, exc)

    def _too_deep(self, call: Any) -> Command | None:
        """The answer to a model's call whose arguments nest deeper than :data:`MAX_ARGUMENT_DEPTH`, if it is one."""
        if not (isinstance(call, dict) and call.get("type") == "tool_call" and call.get("id")):
            return None
        if _depth_at_most(call.get("args"), MAX_ARGUMENT_DEPTH):
            return None
        reason = (f"Error invoking tool '{self.name}': its arguments are nested more than {MAX_ARGUMENT_DEPTH} "
                  "levels deep. Call it again with plain arguments.")
        message = ToolMessage(content=reason, tool_call_id=call["id"], name=self.name, status="error")
        record = invalid_call_record(self.name, call["id"], reason)
        return Command(update={LEDGER_KEY: {record["id"]: ledger_entry(record)}, "messages": [message]})

    def _invalid(self, call: Any, exc: ValidationError) -> Command:
        """The tool node's own answer to these arguments, with this call's ledger record."""
        if is_invalid_resume(exc) or not (isinstance(call, dict) and call.get("type") == "tool_call"
                                          and call.get("id")):
            raise exc  # not bad arguments from a model's tool call: the caller's to handle
        try:
            return self._answered(call, exc)
        except Exception:  # noqa: BLE001 - the failure path must not fail: the tool node answers it, unrecorded
            raise exc from None

    def _answered(self, call: dict[str, Any], exc: ValidationError) -> Command:
        raw = call.get("args")
        args = {k: v for k, v in raw.items() if k not in _INJECTED} if isinstance(raw, dict) else {}
        errors = [cast(ErrorDetails, {**e, "input": _without_injected(e.get("input"))}) for e in exc.errors()
                  if not (e.get("loc") and e["loc"][0] in _INJECTED)]
        message = ToolMessage(content=ToolInvocationError(self.name, exc, args, errors).message,
                              tool_call_id=call["id"], name=self.name, status="error")
        agent = args.get("subagent_type") if isinstance(args.get("subagent_type"), str) else None
        record = invalid_call_record(self.name, call["id"], safe_text(message.content), agent)
        return Command(update={LEDGER_KEY: {record["id"]: ledger_entry(record)}, "messages": [message]})


def _depth_at_most(value: Any, limit: int) -> bool:
    """Whether ``value``'s dicts and lists nest at most ``limit`` deep (iterative: no recursion to exhaust)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return False
        stack.extend((child, depth + 1) for child in children)
    return True


def _without_injected(value: Any) -> Any:
    return {k: v for k, v in value.items() if k not in _INJECTED} if isinstance(value, dict) else value
