"""``SubAgentMiddleware``: the ``task`` tool, in any ``create_agent`` graph (docs/specs.md,
docs/ledger-and-budgets.md)."""

import asyncio
import warnings
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from langchain.agents.middleware import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
)
from langchain.agents.middleware.types import ResponseT, ToolCallRequest
from langchain.tools import ToolRuntime
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.config import get_config
from langgraph.constants import CONF, CONFIG_KEY_CHECKPOINTER
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import get_runtime
from langgraph.types import Command
from langgraph.typing import ContextT

from middleware._limits import (
    DelegationLimit,
    ForcedDelegation,
    coerce_force_delegation,
    is_notice,
    probed,
    refused_outcome,
    warn_if_no_tool_calls,
)
from middleware._root_turn_limit import GraphT, RootBudget
from middleware._stream_status import ChildFailureTransformer
from middleware._task_tool import (
    DELEGATION_INSTRUCTIONS,
    EXCLUDED_STATE_KEYS,
    LEDGER_KEY,
    LOST_REASON,
    STRUCTURED_TASK_TOOL_DESCRIPTION,
    TASK_TOOL_NAME,
    USAGE_KEY,
    SiblingWrites,
    SubagentLedgerState,
    TaskToolInput,
    TaskToolInputWithSchema,
    answered_response,
    available_agents_block,
    delegation_tool,
    invalid_call_record,
    ledger_entry,
    lost_answer,
    open_calls,
    outcome_command,
    task_args_schema,
    task_tool_description,
    tool_message,
    with_answers,
    with_general_purpose,
)
from subagents import AnySpec, SubagentRegistry, TaskCall, TaskOutcome, TaskRecord, TaskRunner, coerce_spec
from subagents._boundary import DELEGATION_TOOL_NAMES, graph_namespace, with_prompt_block
from subagents._builder import BuildOptions
from subagents._errors import InvalidArgumentType, ParentPolicyNotInherited, safe_text
from subagents._ledger import touch_if_quiet
from subagents._outcome import add_usage, lost, task_id_for
from subagents._plans import adrive, drive
from subagents._registry import takes_parent_tools
from subagents._roles import ChildPolicy
from subagents._runner import unwatch_interrupts, watch_interrupts
from subagents._settings import DelegationSettings
from subagents._transcripts import left_by_call

if TYPE_CHECKING:
    from middleware._dynamic import DynamicSubagents


class ParentModel:
    """The model the parent is configured with: ``model=`` if given, else its model request's, first attempt
    only (a fallback middleware wrapping ours retries the same state with a model that is not the parent's)."""

    def __init__(self, given: BaseChatModel | str | None) -> None:
        self.given = given
        self._seen: BaseChatModel | None = None
        self._seen_state_id: int | None = None

    def observe(self, request: ModelRequest[ContextT]) -> None:
        if self.given is None and (id(request.state) != self._seen_state_id or self._seen is None):
            self._seen_state_id, self._seen = id(request.state), request.model

    @property
    def model(self) -> BaseChatModel | str | None:
        return self.given if self.given is not None else self._seen


class SubAgentMiddleware(AgentMiddleware):
    """Adds the ``task`` tool and lists the subagents in the system prompt (docs/specs.md, docs/migrating.md).

    ``model``, ``tools``: what children inherit (default: the parent's; a child is built once, so a parent switching
    models mid-run passes ``model=``). ``model_middleware``: the parent's, as given to ``create_agent`` (LangChain
    exposes no way to read it), the floor every child is built under (docs/approvals.md); not given while children
    take the parent's tools, a :class:`~subagents.ParentPolicyNotInherited` warning (``[]``: it has none).
    ``private_state_keys`` never cross the boundary; ``system_prompt`` precedes ``<available_agents>``, which
    ``{available_agents}`` in ``task_description`` becomes. ``settings`` gives the rest, each option once (its
    ``budget`` covers this agent's model calls and every child's; another root middleware's count under
    :meth:`metered`). ``backend`` and ``state_schema`` are deepagents'.
    Stream events: docs/transcripts-and-streaming.md.
    """

    state_schema = SubagentLedgerState
    child_policy = ChildPolicy(delegates=True)  # a child never takes it: one level
    transformers = (ChildFailureTransformer,)

    def __init__(self, subagents: Sequence[AnySpec | Mapping[str, Any]] | None = (), *,
                 model: BaseChatModel | str | None = None,
                 tools: Sequence[BaseTool | Callable[..., Any] | dict[str, Any]] | None = None,
                 model_middleware: Sequence[AgentMiddleware] | None = None,
                 private_state_keys: frozenset[str] | None = frozenset(),
                 system_prompt: str | None = DELEGATION_INSTRUCTIONS, task_description: str | None = None,
                 settings: DelegationSettings | None = None, backend: Any = None,
                 state_schema: type[Any] | None = None) -> None:
        settings = settings or DelegationSettings()
        limits, definitions = settings.limits, settings.definitions
        super().__init__()
        specs = with_general_purpose([coerce_spec(s) for s in subagents or ()], definitions.general_purpose)
        if state_schema is not None:  # deepagents': its keys reach declarative children, like the parent's own
            if not isinstance(state_schema, type) or not getattr(state_schema, "__annotations__", None):
                raise InvalidArgumentType("SubAgentMiddleware(): argument 'state_schema': expected a TypedDict class "
                                          f"with annotated keys, got {type(state_schema).__name__}")
            definitions = definitions.model_copy(update={"state_schemas": (*definitions.state_schemas, state_schema)})
        options = BuildOptions(definitions, definitions.skills(), EXCLUDED_STATE_KEYS)
        self.backend = backend  # deepagents' required argument, which deepagents keeps and never reads
        floor = parent_floor(type(self).__name__, model_middleware, specs, dynamic=definitions.dynamic_subagents)
        self.registry = SubagentRegistry(specs, options=options, inherited_middleware=floor)
        self._sessions_dir = settings.observability.sessions_dir  # where a stopped task's transcript is found
        self.runner = TaskRunner(self.registry, settings, max_concurrent=limits.max_concurrent_tasks,
                                 excluded_keys=EXCLUDED_STATE_KEYS, private_keys=frozenset(private_state_keys or ()))
        self.budget = limits.budget
        self.root_budget = RootBudget(limits.budget, prices=self.runner.prices) if limits.budget is not None else None
        if self.root_budget is not None:  # the tool wrap only where there is a budget: see _tools_metered
            self.__class__ = _tools_metered(type(self))
        self._writes = SiblingWrites()
        self.parent_model = ParentModel(model)
        self._tools = None if tools is None else list(tools)
        # Created subagents are not known here: with dynamic_subagents the name stays a plain string.
        self._name_enum = definitions.name_enum and not definitions.dynamic_subagents
        agents = [(s.name, s.description) for s in self.registry.specs]
        block = available_agents_block(agents)
        self.prompt_block = "\n\n".join(p for p in (system_prompt, block) if p) if block else ""
        self.structured_results = definitions.structured_results
        self.task_description = STRUCTURED_TASK_TOOL_DESCRIPTION if self.structured_results and \
            task_description is None else task_tool_description(task_description, agents)
        self.tools = [self._task_tool()] if len(self.registry) else []
        self.subagent_names: frozenset[str] = frozenset(self.registry.names)
        """The declared subagent names (deepagents' attribute), ``general-purpose`` included when added."""
        force = coerce_force_delegation(limits.force_delegation)
        self.forced = ForcedDelegation(force, self.registry.names) if force and self.tools else None
        # No cap, no per-call check: the check walks the run's messages on every model call.
        self.delegation_limit = None if limits.max_delegations is None else DelegationLimit(limits.max_delegations)
        self.dynamic: DynamicSubagents | None = None
        if definitions.dynamic_subagents:  # the create_subagent tool and its state
            from middleware import _dynamic as dynamic

            self.dynamic = dynamic.DynamicSubagents(self.registry, system_prompt=system_prompt,
                                                    parent_tools=self._tools,
                                                    max_dynamic_subagents=limits.max_dynamic_subagents)
            self.tools = [self._task_tool(), self.dynamic.tool]
            self.state_schema = self.dynamic.state_schema

    def metered(self, graph: GraphT) -> GraphT:
        """``graph`` (this middleware's) run so that ``budget`` counts another root middleware's own model calls too."""
        return graph if self.root_budget is None else self.root_budget.metered(graph)

    @property
    def system_prompt(self) -> str | None:
        """The text added to the parent's system prompt, as deepagents names it (``None``: nothing)."""
        return self.prompt_block or None

    def _task_tool(self) -> StructuredTool:
        """The ``task`` tool; its functions' hints are classes, not strings: LangChain resolves them on every call."""
        base = TaskToolInputWithSchema if self.structured_results else TaskToolInput
        writes = self._writes

        def plan(runtime: ToolRuntime, description: str, subagent_type: str,
                 output_schema: Any) -> Generator[Any, Any, Command]:  # type: ignore[type-arg]
            """Each step: a function, its async twin, their arguments."""
            call = TaskCall.from_runtime(runtime, subagent_type, description, parent_model=self.parent_model.model,
                                         parent_tools=self._tools, output_schema=output_schema)
            try:
                limit, messages = self.delegation_limit, call.parent_state.get("messages", ())
                reason = limit.refusal(messages, call.tool_call_id) if limit is not None else None
                outcome = refused_outcome(call, reason) if reason is not None else \
                    (yield self.runner.run, self.runner.arun, call)
            except GraphBubbleUp:
                raise
            except Exception as exc:  # noqa: BLE001 - the runner never raises; belt and braces
                record = invalid_call_record(TASK_TOOL_NAME, call.tool_call_id or "", safe_text(exc),
                                             call.subagent_type)
                record.update(stop_reason="error", description=call.description)
                outcome = TaskOutcome(record, error=f"{type(exc).__name__}: {safe_text(exc)}")
            return outcome_command(runtime, outcome, writes, (yield from writes.stored(runtime, outcome)))

        def task(description: str, subagent_type: str, runtime: ToolRuntime,
                 output_schema: Any = None) -> Command:  # type: ignore[type-arg]
            return drive(plan(runtime, description, subagent_type, output_schema), lambda s: s[0](*s[2:]))

        async def atask(description: str, subagent_type: str, runtime: ToolRuntime,
                        output_schema: Any = None) -> Command:  # type: ignore[type-arg]
            return await adrive(plan(runtime, description, subagent_type, output_schema), lambda s: s[1](*s[2:]))

        return delegation_tool(task, atask, TASK_TOOL_NAME, self.task_description,
                               task_args_schema(self.registry.names, base=base) if self._name_enum else base)

    # -- a turn after a stopped run: its open calls answered, in the model's own step (a ``before_agent`` node
    # would be a step and a checkpoint more in every run).

    def _at_start(self, request: ModelRequest[ContextT], calls: Sequence[ToolCall],
                  saved: Sequence[CheckpointTuple]) -> tuple[ModelRequest[ContextT], dict[str, Any]]:
        """At a run's first model call: the request with the ``calls`` a stopped run left open answered
        (:func:`answer_open_calls`) and the update keeping them; else a quiet ledger touched (``touch_if_quiet``)."""
        state = request.state
        messages = state.get("messages") or ()
        if not messages or not isinstance(messages[-1], HumanMessage):
            return request, {}
        ours = self._tool_names

        def lost_one(call: ToolCall, args: Mapping[str, Any], left: tuple[str, str | None]) -> Answered | None:
            if call.get("name") not in ours:  # another library's tool: its own middleware answers; ours, none
                return None if call.get("name") in DELEGATION_TOOL_NAMES else (lost_answer(call), None)
            agent_type = str(args.get("subagent_type") or args.get("name") or "(unknown)")
            fields = lost(LOST_REASON, left[1])
            record = TaskRecord(id=left[0], agent_type=agent_type, tool_call_id=call["id"], duration_ms=0.0,
                                description=str(args.get("description") or ""), started_at=fields["finished_at"],
                                **fields).model_dump()
            return (tool_message(agent_type, call["id"], answer=None, error=LOST_REASON, tool_name=str(call["name"])),
                    ledger_entry(record))

        answers, update = answer_open_calls(
            calls, saved, lost_one, kept={str(c["id"]) for c in calls if c.get("name") in ours
                                          or c.get("name") not in DELEGATION_TOOL_NAMES},
            ledger_key=LEDGER_KEY, sessions_dir=self._sessions_dir,
            ledger=cast("Mapping[str, object]", state.get(LEDGER_KEY) or {}),  # a key AgentState does not declare
            thread_id=(get_config().get("configurable") or {}).get("thread_id")) if calls else ({}, {})
        if not answers:
            return request, touch_if_quiet(state, LEDGER_KEY, self._tool_names,
                                           is_turn=lambda message: not is_notice(message)) or {}
        update["messages"] = with_answers(messages, answers)
        return request.override(messages=with_answers(request.messages, answers)[1:]), update

    @property
    def _tool_names(self) -> tuple[str, ...]:
        return (TASK_TOOL_NAME, self.dynamic.tool.name) if self.dynamic else (TASK_TOOL_NAME,)

    def wrap_model_call(
        self, request: ModelRequest[ContextT], handler: Callable[[ModelRequest[ContextT]], ModelResponse[ResponseT]]
    ) -> ModelCallResult[ResponseT]:
        calls = _open_at_start(request.state)
        plan = self._plan(request, calls, _saved_checkpoints(calls) if calls else (), watch=True)
        return drive(plan, lambda step: step() if callable(step) else handler(step))

    async def awrap_model_call(self, request: ModelRequest[ContextT],
                               handler: Callable[[ModelRequest[ContextT]], Awaitable[ModelResponse[ResponseT]]]
                               ) -> ModelCallResult[ResponseT]:
        calls = _open_at_start(request.state)
        plan = self._plan(request, calls, await _asaved_checkpoints(calls) if calls else (), watch=False)
        return await adrive(plan, lambda step: asyncio.to_thread(step) if callable(step) else handler(step))

    def _plan(self, request: ModelRequest[ContextT], calls: Sequence[ToolCall], saved: Sequence[CheckpointTuple], *,
              watch: bool, budgeted: bool = False) -> Generator[Any, Any, ModelCallResult[ResponseT]]:
        """The parent's model call, under the shared budget if any (it covers the parent's own calls too): a step
        that is a function is work to do off the event loop, any other the request to send."""
        if self.root_budget is not None and not budgeted:  # its plan makes the call by this one, ``budgeted``
            return (yield from self.root_budget.plan(request, lambda r: self._plan(r, calls, saved, watch=watch,
                                                                                    budgeted=True)))
        request, update = self._at_start(request, calls, saved)
        self.parent_model.observe(request)
        if self.delegation_limit is not None:
            request = self.delegation_limit.withdrawn_when_exhausted(request)
        block = self.dynamic.prompt_block(request.state) if self.dynamic else self.prompt_block
        request = with_prompt_block(request, block)
        # Served: the model may call ``task`` here (a limit may have withdrawn it) and its server could say it cannot.
        if self.forced is None and _names_a_server(request.model) and \
                any(getattr(t, "name", None) == TASK_TOOL_NAME for t in request.tools):
            yield from probed(request.model)
            warn_if_no_tool_calls(request.model)
        response = answered_response((yield from self.forced.plan(request)) if self.forced else (yield request),
                                     self._tool_names, LEDGER_KEY, as_record=ledger_entry)
        # A synchronous run on the main thread: while its children run, a Ctrl-C stops them first (see the
        # runner); Python's own handler is back once a model call starts none.
        if watch:
            (watch_interrupts if _calls(response, self._tool_names) else unwatch_interrupts)()
        return _with_update(response, update)

def _calls(response: ModelCallResult[ResponseT], tool_names: Sequence[str]) -> bool:
    model_response = response.model_response if isinstance(response, ExtendedModelResponse) else response
    messages = model_response.result if isinstance(model_response, ModelResponse) else [model_response]
    return any(call.get("name") in tool_names for m in messages if isinstance(m, AIMessage) for call in m.tool_calls)


def _with_update(response: ModelCallResult[ResponseT], update: dict[str, Any]) -> ModelCallResult[ResponseT]:
    """``response`` with ``update`` written in the model's step too: answers put in place rewrite ``messages``
    whole (as LangChain's own repair of invalid calls does), ending with the model's answer."""
    if not update:
        return response
    if isinstance(response, ExtendedModelResponse):
        model_response, written = response.model_response, dict(getattr(response.command, "update", None) or {})
    elif isinstance(response, ModelResponse):
        model_response, written = response, {}
    else:
        model_response, written = ModelResponse(result=[response]), {}
    if "messages" in update:
        update = {**update, "messages": [*update["messages"], *model_response.result]}
    merged = {**written, **update}
    if LEDGER_KEY in written and LEDGER_KEY in update:
        merged[LEDGER_KEY] = {**update[LEDGER_KEY], **written[LEDGER_KEY]}
    return ExtendedModelResponse(model_response=model_response, command=Command(update=merged))


# -- What finished before a stop is kept, as a resume keeps it: a new user message starts after the stopped
# step's checkpoint, whose pending writes LangGraph then drops. So a run that starts with open calls reads the
# thread's checkpoints back (public ``list``) to the step that made them; only such a thread pays for it.


def _open_at_start(state: Mapping[str, Any]) -> list[ToolCall]:
    """The calls a stopped run left open, at a run's first model call (the state ends with the user's message)."""
    messages = state.get("messages") or ()
    return open_calls(messages) if messages and isinstance(messages[-1], HumanMessage) else []


def _where_saved() -> tuple[BaseCheckpointSaver[str], RunnableConfig] | None:
    saver = (get_config().get(CONF) or {}).get(CONFIG_KEY_CHECKPOINTER)
    info = get_runtime().execution_info
    if saver is None or info is None or info.thread_id is None:
        return None
    namespace = graph_namespace(info.checkpoint_ns, info.task_id)
    return saver, {CONF: {"thread_id": info.thread_id, "checkpoint_ns": namespace}}


def _saved_checkpoints(calls: Sequence[Mapping[str, object]]) -> list[CheckpointTuple]:
    where = _where_saved()
    kept: list[CheckpointTuple] = []
    for saved in where[0].list(where[1]) if where is not None else ():
        kept.append(saved)
        if _made(saved, calls):
            break  # the listing, left here, is closed as it is dropped
    return kept


async def _asaved_checkpoints(calls: Sequence[Mapping[str, object]]) -> list[CheckpointTuple]:
    where = _where_saved()
    kept: list[CheckpointTuple] = []
    if where is None:
        return kept
    listing = where[0].alist(where[1])
    try:
        async for saved in listing:
            kept.append(saved)
            if _made(saved, calls):
                break
    finally:  # closed as it is left: a saver's listing may hold its connection's lock until it ends
        close = getattr(listing, "aclose", None)
        if close is not None:
            await close()
    return kept


def _made(saved: CheckpointTuple, calls: Sequence[Mapping[str, object]]) -> bool:
    """Whether the checkpoint's pending writes end ``messages`` with the model's message that made ``calls``
    (its last: a later hook's rewrite of the whole list holds it too)."""
    ids = {c.get("id") for c in calls}
    lasts = [value[-1] if isinstance(value, list) and value else value
             for _, channel, value in saved.pending_writes or () if channel == "messages"]
    return any(isinstance(m, AIMessage) and any(c.get("id") in ids for c in m.tool_calls) for m in lasts)


Answered = tuple[ToolMessage, dict[str, Any] | None]  # an open call's answer, and the ledger record it adds


def answer_open_calls(calls: Sequence[Any], saved: Sequence[CheckpointTuple],
                      answer: Callable[[Any, Mapping[str, Any], tuple[str, str | None]], Answered | None], *,
                      kept: set[str], ledger_key: str, sessions_dir: Any, ledger: Mapping[str, Any], thread_id: Any
                      ) -> tuple[dict[str, ToolMessage], dict[str, Any]]:
    """(call id -> answer, ledger and usage update) for the calls a stopped run left open: one of ``kept`` that a
    task answered before the stop (in ``saved``, the checkpoints since) keeps that answer and its ledger writes;
    any other gets ``answer(call, args, (task id, transcript))``, the id and transcript its child began if any
    (else an id of its own, stable for the call: the runner's depended on the tool step that was stopped)."""
    answers: dict[str, ToolMessage] = {}
    records: dict[str, Any] = {}
    usage: dict[str, Any] | None = None
    for checkpoint in saved:
        by_task: dict[str, list[tuple[str, object]]] = {}
        for task_id, channel, value in checkpoint.pending_writes or ():
            by_task.setdefault(task_id, []).append((channel, value))
        for writes in by_task.values():
            found = [m for channel, value in writes if channel == "messages"
                     for m in (value if isinstance(value, list) else [value])
                     if isinstance(m, ToolMessage) and m.tool_call_id in kept and m.tool_call_id not in answers]
            if not found:
                continue
            answers.update((m.tool_call_id, m) for m in found)
            for channel, value in writes:
                if channel == ledger_key and isinstance(value, Mapping):
                    records.update(value)
                elif channel == USAGE_KEY and isinstance(value, Mapping):
                    usage = add_usage(usage, dict(value))
    left = left_by_call(sessions_dir, thread_id, kept - set(answers), ledger)
    for call in (c for c in calls if c["id"] not in answers):
        given = call.get("args")
        made = answer(call, given if isinstance(given, Mapping) else {},
                      left.get(call["id"]) or (task_id_for(thread_id, "", call["id"]), None))
        if made is not None:
            answers[call["id"]], record = made
            if record is not None:
                records[record["id"]] = record
    update: dict[str, Any] = {ledger_key: records} if records else {}
    if usage is not None:
        update[USAGE_KEY] = usage
    return answers, update


def _names_a_server(model: object) -> bool:
    """Whether ``model`` names a server (read where declared: on a model without the field pydantic raises)."""
    declared = "openai_api_base" in getattr(type(model), "model_fields", ())
    return declared and bool(getattr(model, "openai_api_base", None))


def parent_floor(owner: str, model_middleware: Sequence[AgentMiddleware] | None, specs: Sequence[AnySpec], *,
                 dynamic: bool = False) -> tuple[AgentMiddleware, ...]:
    """The parent's middleware as given; one :class:`ParentPolicyNotInherited` warning when it was not and a
    child takes the parent's tools (an approval on one would otherwise stop at the parent)."""
    if model_middleware is not None:
        return tuple(model_middleware)
    takers = [s.name for s in specs if takes_parent_tools(s)] + (["created at run time"] if dynamic else [])
    if takers:
        warnings.warn(ParentPolicyNotInherited(owner, takers), stacklevel=3)
    return ()


_METERED: dict[type[SubAgentMiddleware], type[SubAgentMiddleware]] = {}


def _tools_metered(cls: type[SubAgentMiddleware]) -> type[SubAgentMiddleware]:
    """``cls`` (same name) with :meth:`RootBudget.in_tools` around each root tool call, ``cls``'s own wrap inside. Only
    where there is a budget: LangChain runs a ``wrap_tool_call`` hook, in a LangSmith span, around every tool call."""
    # Either defined, LangChain calls both paths' (the one not defined raising): so does the wrap here.
    own = cls.wrap_tool_call is not AgentMiddleware.wrap_tool_call or \
        cls.awrap_tool_call is not AgentMiddleware.awrap_tool_call

    def wrap_tool_call(self: SubAgentMiddleware, request: ToolCallRequest,
                       handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]) -> ToolMessage | Command[Any]:
        assert self.root_budget is not None  # only set where there is one
        with self.root_budget.in_tools():
            return cls.wrap_tool_call(self, request, handler) if own else handler(request)

    async def awrap_tool_call(self: SubAgentMiddleware, request: ToolCallRequest, handler: Callable[
            [ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]) -> ToolMessage | Command[Any]:
        assert self.root_budget is not None
        with self.root_budget.in_tools():
            return await cls.awrap_tool_call(self, request, handler) if own else await handler(request)

    if cls in _METERED.values():
        return cls
    return _METERED.setdefault(cls, type(cls.__name__, (cls,), {
        "wrap_tool_call": wrap_tool_call, "awrap_tool_call": awrap_tool_call,
        "__module__": cls.__module__, "__qualname__": cls.__qualname__}))
