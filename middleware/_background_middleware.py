"""``BackgroundSubagentMiddleware``: subagents as background tasks the parent tracks.

Example::

    import sqlite3

    from langchain.agents import create_agent
    from langgraph.checkpoint.sqlite import SqliteSaver
    from middleware import BackgroundSubagentMiddleware

    agent = create_agent(
        "openai:gpt-4.1-mini",
        tools=[search],
        middleware=[
            BackgroundSubagentMiddleware(
                subagents=[
                    {"name": "researcher", "description": "Finds facts.", "tools": ["search"]},
                    {"name": "crawler", "description": "Crawls at scale.",
                     "graph_id": "crawler", "url": "https://my-server.example.com"},
                ],
                max_concurrent_tasks=4,
            )
        ],
        checkpointer=SqliteSaver(sqlite3.connect("agent.db", check_same_thread=False)),
    )

Six tools -- ``start_async_task``, ``check_async_task``, ``update_async_task``,
``cancel_async_task``, ``list_async_tasks``, ``retry_async_task`` -- and the
ledger ``async_tasks`` (see :class:`subagents.AsyncTaskRecord`), merged by a
reducer field by field.

Decisions a LangGraph user may want to know:

* **In-process by default.** A spec without ``graph_id`` runs in this
  process on the background loop, through the same runner as ``task``:
  same isolation, one-level rule, limits and fault handling. A spec with
  ``graph_id`` and ``url`` (a :class:`subagents.RemoteSubagentSpec`) runs on
  a LangGraph Server.
* **Answers only.** A background child hands back its answer (and usage),
  never state keys: by the time it finishes the parent has moved on, and
  merging its writes then would overwrite newer state.
* **Nothing lost.** The ledger lives in the parent's checkpoint, and each
  local outcome is stored the moment it settles (beside the checkpoints in a
  SQLite file). A new process resuming a thread reports a task that finished
  before the crash as finished, and one whose process is provably gone as
  ``lost`` (``retry_async_task`` runs it again); a task of another live
  process is left to it. Remote tasks are simply checked again on the server.
* **No polling needed.** Before each parent model call, tasks that finished
  (or wait for approval) since the last call are announced in one message.
* **Give the parent a checkpointer.** A task outlives the turn that started
  it; its result reaches a later turn through the thread's checkpoint.
* **An owned runtime.** Tasks live on a :class:`subagents.BackgroundRuntime`
  the middleware creates (or is given, to share); ``close()`` tears it down,
  and so does dropping the middleware (a ``langgraph dev`` reload, say).
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.tools import ToolRuntime
from langchain_core.messages import HumanMessage
from pydantic import ValidationError

from middleware import _background_prompts as words
from middleware._background_handlers import BackgroundTaskHandlers, ledger_of
from middleware._background_tools import START_TOOL_NAME, background_tools
from middleware._invalid_calls import answered_response, as_background_record
from middleware._ledger import ASYNC_LEDGER_KEY, EXCLUDED_STATE_KEYS
from middleware._model_pipeline import configured_model
from middleware._prompts import available_agents_block, with_general_purpose, with_prompt_block
from subagents import (
    BuildOptions,
    LedgerChannel,
    SpecError,
    SubagentRegistry,
    SubagentSpec,
    TaskCall,
    coerce_spec,
    describe_validation_error,
)
from subagents.background import (
    ACTIVE_STATUSES,
    NOTEWORTHY_STATUSES,
    BackgroundRuntime,
    BackgroundTasks,
    OrphanSearch,
    RemoteSubagentSpec,
    RuntimeClosed,
    SteeringInbox,
    adopt_orphans,
    merge_async_records,
)
from subagents.settings import DelegationSettings

# The settings this middleware reads, given whole (settings=) or as keyword arguments,
# and its own names for two of them.
_ALIASES = {"max_concurrent_tasks": "max_background_tasks", "runtime": "background_runtime"}
_SETTINGS_ARGUMENTS = frozenset({
    "general_purpose", "max_background_tasks", "background_runtime", "unknown_tools", "sessions_dir",
    "prices", "budget", "short_answer_threshold",
})


class AsyncTaskLedgerState(AgentState):
    """Parent state with the ledger of background tasks."""

    async_tasks: NotRequired[Annotated[dict[str, dict[str, Any]], LedgerChannel(dict, merge_async_records)]]


_LIVE = ACTIVE_STATUSES | {"waiting_for_approval"}


class BackgroundSubagentMiddleware(AgentMiddleware):
    """Adds the background-task tools, the ledger, and completion notices.

    Args:
        subagents: specs: :class:`subagents.SubagentSpec`,
            :class:`subagents.CompiledSubagent`,
            :class:`subagents.RemoteSubagentSpec` or plain dicts (a dict
            with ``graph_id`` is a remote spec).
        model: the model local children inherit; default: the parent's.
        tools: the tools local children inherit; default: the parent's.
        general_purpose: add the local ``general-purpose`` subagent.
        max_concurrent_tasks: local tasks running at once; more wait as ``pending``.
        private_state_keys: more keys that never reach a local child.
        system_prompt: text placed before the agents block (``None``: none).
        listed_elsewhere: names another middleware's ``<available_agents>``
            block already lists (``SubAgentMiddleware``'s, say); they are
            left out of this one, so no agent is listed twice.
        notify: announce finished tasks before each model call.
        notice_result_chars: how much of each result a notice quotes.
        notice_total_chars: how long one notice may be, whatever the number
            of tasks; the rest are counted and pointed to ``check_async_task``.
        unknown_tools: what a spec naming a tool the parent lacks gets.
        sessions_dir, prices, budget, short_answer_threshold, build_options:
            as for :class:`SubAgentMiddleware`; they apply to local children.
        runtime: the :class:`subagents.BackgroundRuntime` the tasks live on;
            default: a new one, owned (and closed) by this middleware.
        settings: the :class:`subagents.settings.DelegationSettings` to start
            from, given whole (``create_deep_agent`` does); the keyword
            arguments above that are settings (``general_purpose``,
            ``max_concurrent_tasks`` -- its ``background.max_tasks`` --,
            ``unknown_tools``, ``sessions_dir``, ``prices``, ``budget``,
            ``short_answer_threshold``, ``runtime``) override its fields.
    """

    state_schema = AsyncTaskLedgerState
    delegates = True

    def __init__(
        self,
        subagents: Sequence[Any] = (),
        *,
        model: Any = None,
        tools: Sequence[Any] | None = None,
        private_state_keys: frozenset[str] = frozenset(),
        system_prompt: str | None = words.BACKGROUND_INSTRUCTIONS,
        listed_elsewhere: Collection[str] = (),
        notify: bool = True,
        notice_result_chars: int = 2000,
        notice_total_chars: int = words.DEFAULT_NOTICE_TOTAL_CHARS,
        build_options: BuildOptions | None = None,
        settings: DelegationSettings | None = None,
        **arguments: Any,
    ) -> None:
        super().__init__()
        settings = DelegationSettings.from_arguments("BackgroundSubagentMiddleware", arguments, base=settings,
                                                     accepted=_SETTINGS_ARGUMENTS, aliases=_ALIASES)
        # Background children keep JSONL transcripts, never store ones (they outlive the run's store).
        settings = settings.model_copy(update={
            "observability": settings.observability.model_copy(update={"transcript_store": None})})
        runtime = settings.background.runtime
        self.runtime = runtime if runtime is not None else BackgroundRuntime()
        if runtime is None:  # ours: closed with us, even if nobody calls close()
            self._finalizer = weakref.finalize(self, self.runtime.close_soon)
        local, remote = _split(subagents)
        local = with_general_purpose(local, settings.definitions.general_purpose, taken=(s.name for s in remote))
        inbox = SteeringInbox(self.runtime.inboxes)
        steerable = [
            s.model_copy(update={"middleware": (*s.middleware, inbox)}) if isinstance(s, SubagentSpec) else s
            for s in local
        ]
        options = dataclasses.replace(build_options or BuildOptions(), excluded_keys=EXCLUDED_STATE_KEYS)
        self.registry = SubagentRegistry(steerable, unknown_tools=settings.definitions.unknown_tools, options=options)
        self.tasks = BackgroundTasks(
            self.registry, remote, max_concurrent=settings.background.max_tasks,
            excluded_keys=EXCLUDED_STATE_KEYS, private_keys=frozenset(private_state_keys),
            settings=settings, runtime=self.runtime,
        )
        self._model = model
        self._tools = None if tools is None else list(tools)
        self._seen_model: Any = None
        self.notify = notify
        self.notice_result_chars = notice_result_chars
        self.notice_total_chars = notice_total_chars
        self._orphan_search = OrphanSearch(self.tasks.remote.specs, START_TOOL_NAME)
        agents = [(s.name, s.description) for s in [*local, *remote]]
        skip = set(listed_elsewhere)
        block = available_agents_block(a for a in agents if a[0] not in skip)
        self.prompt_block = "\n\n".join(p for p in (system_prompt, block) if p) if agents else ""
        self.handlers = BackgroundTaskHandlers(self.tasks, self.runtime, self._call)
        self.tools = background_tools(self.handlers) if agents else []

    def close(self) -> None:
        """Close the runtime (injected or not): running tasks are recorded ``lost``, the loop stops."""
        self.runtime.close()

    # -- the tools' calls (their handlers: middleware/_background_handlers.py) --

    def _call(self, runtime: ToolRuntime, description: str, subagent_type: str) -> TaskCall:
        return TaskCall.from_runtime(
            runtime, subagent_type, description,
            parent_model=self._model if self._model is not None else self._seen_model,
            parent_tools=self._tools,
        )

    # -- completion notices ------------------------------------------------

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        orphans = self._orphans(state)
        if not (self._due(state) or orphans):
            return None
        try:
            return self.runtime.run(self._catch_up(state, orphans))
        except RuntimeClosed:  # closed meanwhile: nothing to report
            return None

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        orphans = self._orphans(state)
        if not (self._due(state) or orphans):
            return None
        try:
            return await self.runtime.arun(self._catch_up(state, orphans))
        except RuntimeClosed:
            return None

    def _orphans(self, state: Mapping[str, Any]) -> tuple[str, dict[str, tuple[str, str]]] | None:
        """Remote starts in the messages with no ledger record, not yet looked for in this process."""
        if not self.tasks.remote.specs:
            return None
        return self._orphan_search.due(state.get("messages") or (), ledger_of(state), _thread_id())

    def _due(self, state: Mapping[str, Any]) -> bool:
        return any(
            r.get("status") in _LIVE
            or (self.notify and r.get("status") in NOTEWORTHY_STATUSES and not r.get("announced"))
            for r in ledger_of(state).values()
        )

    async def _catch_up(self, state: Mapping[str, Any],
                        orphans: tuple[str, dict[str, tuple[str, str]]] | None = None) -> dict[str, Any] | None:
        ledger = ledger_of(state)
        adopted = await adopt_orphans(self.tasks.remote, *orphans) if orphans else {}
        ledger.update(adopted)
        try:
            updates = await self.tasks.refresh(ledger)
        except Exception:  # noqa: BLE001 - a status poll must never stop the parent
            updates = {}
        for task_id, record in adopted.items():
            updates[task_id] = {**record, **updates.get(task_id, {})}
        merged = merge_async_records(ledger, updates)
        out: dict[str, Any] = {}
        if self.notify:
            due = [r for r in merged.values()
                   if r["status"] in NOTEWORTHY_STATUSES and not r.get("announced")]
            cut_off = [merged[i] for i, f in updates.items() if f.get("note") and not ledger.get(i, {}).get("note")]
            if due or cut_off:
                for r in due:
                    updates.setdefault(r["id"], {})["announced"] = True
                text = words.notice(due, self.notice_result_chars, self.notice_total_chars, cut_off)
                out["messages"] = [HumanMessage(content=text)]
        if updates:
            out[ASYNC_LEDGER_KEY] = updates
        return out or None

    # -- the prompt ------------------------------------------------------------

    def _with_block(self, request: Any) -> Any:
        seen = configured_model(self, request)  # also tells the registry the parent's pipeline
        if self._model is None:
            self._seen_model = seen
        return with_prompt_block(request, self.prompt_block)

    def _answer_invalid(self, response: Any) -> Any:
        """Background-tool calls with unreadable arguments: answered, recorded, retried."""
        names = [t.name for t in self.tools]
        return answered_response(response, names, ASYNC_LEDGER_KEY, as_record=as_background_record)

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self._answer_invalid(handler(self._with_block(request)))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return self._answer_invalid(await handler(self._with_block(request)))


def _split(subagents: Sequence[Any]) -> tuple[list[Any], list[RemoteSubagentSpec]]:
    local: list[Any] = []
    remote: list[RemoteSubagentSpec] = []
    for spec in subagents:
        if isinstance(spec, RemoteSubagentSpec):
            remote.append(spec)
        elif isinstance(spec, Mapping) and "graph_id" in spec:
            remote.append(_remote_spec(spec))
        else:
            local.append(coerce_spec(spec))
    return local, remote


def _remote_spec(value: Mapping[str, Any]) -> RemoteSubagentSpec:
    try:
        return RemoteSubagentSpec.model_validate(dict(value))
    except ValidationError as exc:
        label = f"remote subagent {value.get('name', '<unnamed>')!r}"
        raise SpecError(describe_validation_error(exc, label)) from None


def _thread_id() -> str | None:
    from langgraph.config import get_config

    try:
        return (get_config().get("configurable") or {}).get("thread_id")
    except RuntimeError:  # not inside a run
        return None
