"""The ``create_subagent`` tool (``dynamic_subagents=True``): the parent defines a specialist at run time
(docs/delegation-modes.md)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, NotRequired

from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command
from pydantic import Field

from middleware._task_tool import (
    LEDGER_KEY,
    ClosedArguments,
    SubagentLedgerState,
    available_agents_block,
    delegation_tool,
    ledger_entry,
)
from subagents import DEFAULT_MAX_TURNS, DynamicSubagentError, SubagentRegistry, TaskRecord
from subagents._outcome import task_id_for
from subagents._registry import DYNAMIC_SUBAGENTS_KEY, DynamicDefinition, check_definition, merge_definitions
from subagents._runner import TASK_ID_METADATA_KEY, inheritable_tool_names

CREATE_SUBAGENT_DESCRIPTION = f"""Define a new specialist subagent for this conversation.

Give it a slug `name`, a one-line `description` (you will choose agents by it), and a
`system_prompt` with its standing instructions. `tools` (optional) narrows your own
tools to the ones it needs; omitted, it gets all of yours that a subagent may hold.
`max_turns` (optional, 1-{DEFAULT_MAX_TURNS}) caps its model calls. It is listed in
<available_agents> from your next turn; delegate to it with `task` then."""


class CreateSubagentInput(ClosedArguments):
    """Arguments of the ``create_subagent`` tool."""

    name: str = Field(description="A slug: letters, digits, '-' and '_'. Must be new.")
    description: str = Field(description="What it does, in one line; shown in <available_agents>.")
    system_prompt: str = Field(description="Its standing instructions.")
    tools: list[str] | None = Field(default=None, description="Names of your tools it may use (omit: all of yours).")
    max_turns: int | None = Field(default=None, description=f"Its model-call limit, 1 to {DEFAULT_MAX_TURNS}.")


class DynamicSubagentState(SubagentLedgerState):
    """Parent state with the subagents defined at run time."""

    dynamic_subagents: NotRequired[Annotated[dict[str, dict[str, object]], merge_definitions]]


class DynamicSubagents:
    """The ``create_subagent`` tool, its state and its prompt rows, for one middleware."""

    state_schema = DynamicSubagentState

    def __init__(self, registry: SubagentRegistry, *, system_prompt: str | None, parent_tools: Sequence[Any] | None,
                 max_dynamic_subagents: int) -> None:  # Limits' field, checked there
        self.registry = registry
        self.system_prompt = system_prompt
        self.parent_tools = None if parent_tools is None else list(parent_tools)
        self.cap = max_dynamic_subagents
        # As `task`: arguments that do not validate are answered with a record.
        self.tool = delegation_tool(self.create, self.acreate, "create_subagent", CREATE_SUBAGENT_DESCRIPTION,
                                    CreateSubagentInput)

    def prompt_block(self, state: Mapping[str, object] | None) -> str:
        """Instructions and ``<available_agents>``, declared agents first, then created ones."""
        created = _definitions(state)
        rows = [(s.name, s.description) for s in self.registry.specs]
        rows += [(n, str(d.get("description", ""))) for n, d in created.items() if n not in self.registry]
        left = max(0, self.cap - len(created))
        note = (f"You can also create a specialist with `create_subagent` ({left} of {self.cap} left); "
                "it is listed here from your next turn.")
        return "\n\n".join(p for p in (self.system_prompt, available_agents_block(rows), note) if p)

    async def acreate(self, runtime: ToolRuntime, **arguments: object) -> Command[str]:
        return self.create(runtime, **arguments)

    def create(self, runtime: ToolRuntime, **arguments: object) -> Command[str]:
        """Check and keep one definition; every outcome is one ToolMessage and one record."""
        started = time.time()
        name = str(arguments.get("name", ""))
        try:
            if (runtime.config.get("metadata") or {}).get(TASK_ID_METADATA_KEY):
                raise DynamicSubagentError("subagents cannot create subagents; do the work yourself")
            existing = self._with_earlier_siblings(runtime)
            definition = self._check(arguments, existing, runtime)
        except DynamicSubagentError as exc:
            return self._result(runtime, name, arguments, started, error=str(exc))
        except Exception as exc:  # noqa: BLE001 - the failure path never raises
            return self._result(runtime, name, arguments, started, error=f"{type(exc).__name__}: {exc}")
        return self._result(runtime, name, arguments, started, definition=definition)

    def _check(self, arguments: Mapping[str, object], existing: Mapping[str, object], runtime: ToolRuntime
               ) -> DynamicDefinition:
        return check_definition(arguments, declared=self.registry.names, existing=existing,
                                parent_tools=inheritable_tool_names(
                                    self.parent_tools if self.parent_tools is not None else (runtime.tools or ())),
                                cap=self.cap)

    def _with_earlier_siblings(self, runtime: ToolRuntime) -> dict[str, object]:
        """The definitions in state plus those that earlier calls of this same message will add."""
        existing = dict(_definitions(runtime.state))
        made = next((m for m in reversed(list(runtime.state.get("messages") or ())) if isinstance(m, AIMessage)
                     and runtime.tool_call_id in [c.get("id") for c in m.tool_calls]), None)  # this call's message
        calls = made.tool_calls if made is not None else []
        earlier = calls[: [c.get("id") for c in calls].index(runtime.tool_call_id) if calls else 0]
        for call in (c for c in earlier if c.get("name") == "create_subagent"):
            try:
                definition = self._check(call.get("args") or {}, existing, runtime)
            except Exception:  # noqa: BLE001 - a refused sibling adds nothing
                continue
            existing[definition.name] = definition.model_dump()
        return existing

    def _result(self, runtime: ToolRuntime, name: str, arguments: Mapping[str, object], started: float, *,
                definition: DynamicDefinition | None = None, error: str | None = None) -> Command[str]:
        configurable = runtime.config.get("configurable") or {}
        task_id = task_id_for(configurable.get("thread_id"), configurable.get("checkpoint_ns", ""),
                              runtime.tool_call_id)
        finished = time.time()
        label = name[:64] or "<unnamed>"
        content = f"Subagent {label!r} was not created: {error}" if error is not None else (
            f"Created subagent {label!r}. It is listed in <available_agents> from your next "
            f"turn; delegate to it with task(subagent_type={label!r}).")
        record = TaskRecord(id=task_id, agent_type=label, tool_call_id=runtime.tool_call_id,
                            status="error" if error is not None else "completed",
                            description=str(arguments.get("description", ""))[:1000],
                            result=content if error is None else None, error=error,
                            started_at=started, finished_at=finished, duration_ms=round((finished - started) * 1000, 3),
                            kind="create_subagent").model_dump()
        update: dict[str, object] = {
            LEDGER_KEY: {task_id: ledger_entry(record)},
            "messages": [ToolMessage(content=content, tool_call_id=runtime.tool_call_id or "",
                                     name="create_subagent", status="error" if error else "success")],
        }
        if definition is not None:
            update[DYNAMIC_SUBAGENTS_KEY] = {definition.name: {
                **definition.model_dump(), "created_at": started, "tool_call_id": runtime.tool_call_id,
            }}
        return Command(update=update)


def _definitions(state: Mapping[str, object] | None) -> Mapping[str, Any]:
    value = (state or {}).get(DYNAMIC_SUBAGENTS_KEY) if isinstance(state, Mapping) else None
    return value if isinstance(value, Mapping) else {}
