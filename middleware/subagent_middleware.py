"""``SubAgentMiddleware``: the ``task`` tool, in any ``create_agent`` graph.

Example::

    from langchain.agents import create_agent
    from middleware import SubAgentMiddleware

    agent = create_agent(
        "openai:gpt-4.1-mini",
        tools=[search],
        middleware=[
            SubAgentMiddleware(
                subagents=[
                    {"name": "researcher", "description": "Finds facts.",
                     "system_prompt": "Research and cite.", "tools": ["search"]},
                ],
                max_concurrent_tasks=4,
            )
        ],
    )

Decisions a LangGraph user may want to know:

* Children inherit the parent's model and tools unless their spec names
  others. When the middleware is not given ``model``/``tools``, it uses the
  model of the parent's model request before the child is first built and
  the tools of the parent's tool node (never the delegation tools
  themselves). A child is built once, so a parent that switches models
  mid-run should pass ``model=`` explicitly.
* The ledger ``subagent_tasks`` holds one JSON-ready record per delegation
  (see :class:`subagents.TaskRecord`), merged by a reducer.
* ``max_concurrent_tasks`` caps children of this agent running at once,
  across its concurrent runs; extra calls wait their turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.tools import ToolRuntime
from langchain_core.tools import StructuredTool
from langgraph.types import Command

from middleware.prompts import (
    DELEGATION_INSTRUCTIONS,
    GENERAL_PURPOSE_DESCRIPTION,
    GENERAL_PURPOSE_NAME,
    GENERAL_PURPOSE_PROMPT,
    TASK_TOOL_DESCRIPTION,
    available_agents_block,
    with_prompt_block,
)
from middleware.delegation_limit import DEFAULT_MAX_DELEGATIONS, DelegationLimit, refused_command
from middleware.force_delegation import ForcedDelegation, ForceSetting, coerce_force_delegation
from middleware.task_args_schema import task_args_schema
from subagents import (
    AnySpec,
    BuildOptions,
    Budget,
    PriceTable,
    SubagentRegistry,
    SubagentSpec,
    TaskCall,
    TaskRunner,
    add_usage,
    coerce_spec,
    merge_records,
)
from subagents.continuation import DEFAULT_SHORT_ANSWER_THRESHOLD
from subagents.one_level import DELEGATION_TOOL_TAG


class SubagentLedgerState(AgentState):
    """Parent state with the ledger of synchronous delegations and their usage rollup."""

    subagent_tasks: NotRequired[Annotated[dict[str, dict[str, Any]], merge_records]]
    subagent_usage: NotRequired[Annotated[dict[str, Any], add_usage]]


class SubAgentMiddleware(AgentMiddleware):
    """Adds the ``task`` tool and lists the subagents in the system prompt.

    Args:
        subagents: specs (:class:`subagents.SubagentSpec`,
            :class:`subagents.CompiledSubagent` or plain dicts).
        model: the model children inherit; default: the parent's.
        tools: the tools children inherit; default: the parent's.
        general_purpose: add the ``general-purpose`` subagent unless a spec
            of that name replaces it.
        max_concurrent_tasks: how many children may run at once.
        private_state_keys: more keys that never cross the boundary (see
            :func:`subagents.private_state_keys` for a middleware list's).
        system_prompt: text placed before the ``<available_agents>`` block.
        unknown_tools: what a spec naming a tool the parent lacks gets.
        sessions_dir: also write each child's transcript as JSONL under
            ``<sessions_dir>/<thread_id>/subagents/agent-<task_id>.jsonl``.
        transcript_store: ``True`` to keep transcripts in the graph's
            ``BaseStore`` (or a store to use).
        prices: model name -> USD per million (input, output) tokens, for
            the cost in each record.
        budget: a :class:`subagents.Budget` covering this agent's own model
            calls and every child's.
        short_answer_threshold: a child answer shorter than this gets one
            request for a complete report (0: off).
        build_options: model profiles, skills, risky tools and the parent's
            permission policy used when children are built (see
            :class:`subagents.BuildOptions`).
        force_delegation: make the first model call of each turn call
            ``task``: ``True`` (any agent), an agent name, or a
            :class:`middleware.ForceDelegation` choosing the mechanism.
        max_delegations: ``task`` calls allowed per run (since the last
            user message; ``None``: no cap). Past it, ``task`` answers with
            an error and is no longer offered to the model.

    Streaming: with ``stream_mode="custom"`` the parent's stream carries
    ``{"type": "subagent_task", "task_id", "tool_call_id", "agent_type",
    "status", ...}`` when each task starts (with the child's stream
    ``namespace``), pauses for approval, and ends. Every child event on the
    ``messages`` stream carries ``subagent_task_id`` and
    ``subagent_tool_call_id`` in its metadata.
    """

    state_schema = SubagentLedgerState
    delegates = True

    def __init__(
        self,
        subagents: Sequence[AnySpec | Mapping[str, Any]] = (),
        *,
        model: Any = None,
        tools: Sequence[Any] | None = None,
        general_purpose: bool = True,
        max_concurrent_tasks: int | None = None,
        private_state_keys: frozenset[str] = frozenset(),
        system_prompt: str | None = DELEGATION_INSTRUCTIONS,
        unknown_tools: Literal["error", "warn", "ignore"] = "warn",
        sessions_dir: str | None = None,
        transcript_store: Any = None,
        prices: PriceTable | None = None,
        budget: Budget | None = None,
        short_answer_threshold: int = DEFAULT_SHORT_ANSWER_THRESHOLD,
        build_options: BuildOptions | None = None,
        force_delegation: ForceSetting = None,
        max_delegations: int | None = DEFAULT_MAX_DELEGATIONS,
    ) -> None:
        super().__init__()
        specs = [coerce_spec(s) for s in subagents]
        if general_purpose and not any(s.name == GENERAL_PURPOSE_NAME for s in specs):
            specs.insert(
                0,
                SubagentSpec(
                    name=GENERAL_PURPOSE_NAME,
                    description=GENERAL_PURPOSE_DESCRIPTION,
                    system_prompt=GENERAL_PURPOSE_PROMPT,
                ),
            )
        self.registry = SubagentRegistry(specs, unknown_tools=unknown_tools, options=build_options)
        self.runner = TaskRunner(
            self.registry,
            max_concurrent=max_concurrent_tasks,
            private_keys=frozenset(private_state_keys),
            sessions_dir=sessions_dir,
            transcript_store=transcript_store,
            prices=prices,
            budget=budget,
            short_answer_threshold=short_answer_threshold,
        )
        self.budget = budget
        self._model = model
        self._tools = None if tools is None else list(tools)
        self._seen_model: Any = None

        block = available_agents_block((s.name, s.description) for s in self.registry.specs)
        self.prompt_block = (
            "\n\n".join(p for p in (system_prompt, block) if p) if block else ""
        )
        self.tools = [self._task_tool()] if len(self.registry) else []
        # Forced delegation and the parent's delegation cap (their own files).
        force = coerce_force_delegation(force_delegation)
        self.forced = ForcedDelegation(force, self.registry.names) if force and self.tools else None
        self.delegation_limit = DelegationLimit(max_delegations)

    # -- the tool -----------------------------------------------------------

    def _task_tool(self) -> StructuredTool:
        def task(description: str, subagent_type: str, runtime: ToolRuntime) -> Command:
            call = self._call(description, subagent_type, runtime)
            return self._refused(call) or self.runner.run(call)

        async def atask(description: str, subagent_type: str, runtime: ToolRuntime) -> Command:
            call = self._call(description, subagent_type, runtime)
            return self._refused(call) or await self.runner.arun(call)

        return StructuredTool.from_function(
            func=task,
            coroutine=atask,
            name="task",
            description=TASK_TOOL_DESCRIPTION,
            args_schema=task_args_schema(self.registry.names),
            infer_schema=False,
            metadata={DELEGATION_TOOL_TAG: True},
        )

    def _call(self, description: str, subagent_type: str, runtime: ToolRuntime) -> TaskCall:
        return TaskCall.from_runtime(
            runtime, subagent_type, description,
            parent_model=self._model if self._model is not None else self._seen_model,
            parent_tools=self._tools,
        )

    def _refused(self, call: TaskCall) -> Command | None:
        reason = self.delegation_limit.refusal(call.parent_state.get("messages", ()), call.tool_call_id)
        return None if reason is None else refused_command(call, reason)

    # -- the prompt -----------------------------------------------------------

    def _with_block(self, request: Any) -> Any:
        if self._model is None:
            self._seen_model = request.model
        request = self.delegation_limit.withdrawn_when_exhausted(request)
        return with_prompt_block(request, self.prompt_block)

    def _charge(self, response: Any) -> None:
        # The shared budget covers the parent's own calls too.
        if self.budget is None:
            return
        for message in getattr(response, "result", ()) or ():
            usage = getattr(message, "usage_metadata", None)
            if usage:
                name = (getattr(message, "response_metadata", None) or {}).get("model_name")
                self.budget.charge(name, usage.get("input_tokens", 0), usage.get("output_tokens", 0))

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        request = self._with_block(request)
        response = self.forced.call(request, handler) if self.forced else handler(request)
        self._charge(response)
        return response

    async def awrap_model_call(
        self, request: Any, handler: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        request = self._with_block(request)
        response = await (self.forced.acall(request, handler) if self.forced else handler(request))
        self._charge(response)
        return response
