"""``BackgroundSubagentMiddleware``: subagents as background tasks the parent tracks (docs/background.md)."""

from __future__ import annotations

import contextlib
import json
import logging
import reprlib
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, get_type_hints

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
    Runtime,
)
from langchain.agents.middleware.types import ResponseT
from langchain.tools import ToolRuntime
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.config import get_config
from langgraph.types import Command
from langgraph.typing import ContextT
from pydantic import BaseModel, Field, ValidationError

from middleware._limits import START_TOOL_NAME, DelegationLimit, is_notice, notice_message, refused_outcome
from middleware._subagents import (
    Answered,
    ParentModel,
    SubAgentMiddleware,
    _asaved_checkpoints,
    _saved_checkpoints,
    answer_open_calls,
    parent_floor,
)
from middleware._task_tool import (
    ASYNC_LEDGER_KEY,
    EXCLUDED_STATE_KEYS,
    LOST_REASON,
    RecordedTool,
    TaskToolInput,
    answered_response,
    as_background_record,
    available_agents_block,
    clip,
    lost_answer,
    open_calls,
    with_answers,
    with_general_purpose,
)
from middleware._thread_catch_up import ThreadCatchUp
from subagents import AnySpec, BuildOptions, SpecError, SubagentRegistry, SubagentSpec, TaskCall, coerce_spec
from subagents._boundary import DELEGATION_TOOL_TAG, with_prompt_block
from subagents._errors import InvalidArgumentType, StopReason, UnknownSubagent, brief, safe_text
from subagents._ledger import LedgerChannel, touch_if_quiet
from subagents._outcome import lost
from subagents._plans import adrive, drive
from subagents._roles import ChildPolicy
from subagents._settings import DEFAULT_NOTICE_TOTAL_CHARS, DelegationSettings
from subagents._spec import describe_validation_error
from subagents.background import (
    ACTIVE_STATUSES,
    NOTEWORTHY_STATUSES,
    AsyncTaskRecord,
    AsyncTaskStatus,
    BackgroundRuntime,
    BackgroundTasks,
    OrphanSearch,
    OwnLoopModels,
    RemoteSubagentSpec,
    RuntimeClosed,
    SteeringInbox,
    TaskStateError,
    adopt_orphans,
    merge_async_records,
    record_problem,
    usable_records,
)
from subagents.background._ledger import LIVE_STATUSES, now
from subagents.background._runtime import background_child_middleware, checkpoint_db
from subagents.background._tasks import approval_answer

log = logging.getLogger(__name__)

# The words: results the model reads back are compact JSON (ids and statuses quoted exactly); confirmations are
# one sentence naming the task id.

BACKGROUND_INSTRUCTIONS = """You can also run subagents in the background with `start_async_task`.
It returns a task id at once and the subagent works while you continue. You are told
when a background task finishes, so do not poll in a loop: do other work, or end your
turn and the result will be there in a later turn. Use `check_async_task` for one task's
status and result, `update_async_task` to send it a new instruction (or a follow-up once
it has finished, or a refusal when it waits for a person's approval), `cancel_async_task`,
`list_async_tasks`, and `retry_async_task` for failed, cancelled or lost tasks."""

START_DESCRIPTION = """Start a subagent in the background and return its task id at once.

The subagent sees only `description`, never this conversation: put every instruction,
the context it needs and the form of the answer you want in it. Choose `subagent_type`
from <available_agents>. You will be told when the task finishes."""

CHECK_DESCRIPTION = """Get a background task's status and, once it has finished, its result or error."""

UPDATE_DESCRIPTION = """Send a message to a background task.

A running task sees it before its next step (use this to steer it). A completed task
continues the same conversation with it as a follow-up. A task waiting for approval
waits for a person: you cannot approve it, but you may refuse it with decision="reject"
(your message is then the reason the task sees)."""

CANCEL_DESCRIPTION = """Cancel a pending, running or waiting background task."""

LIST_DESCRIPTION = """List background tasks with their statuses, newest first, optionally only those with one status.

Long lists come in pages: the answer says how many older tasks are left and the `offset` to ask for next."""

RETRY_DESCRIPTION = """Run a failed, cancelled or lost background task again, under the same task id."""

_PREVIEW = 80


def started(record: Mapping[str, object]) -> str:
    # Short: a turn may start hundreds of tasks, and each confirmation stays in the history.
    return f"Started background task {record['id']} ({record['agent_type']}); you will be told when it ends."


def checked(record: Mapping[str, object], problem: str | None = None) -> str:
    """One task as the model sees it."""
    view: dict[str, object] = {"task_id": record["id"], "agent_type": record["agent_type"], "status": record["status"]}
    if record.get("result") is not None and record["status"] == "completed":
        view["result"] = record["result"]
    if record.get("error"):
        view["error"] = record["error"]
    if record["status"] == "waiting_for_approval":
        view["approval_request"] = record.get("approval_request")
    view["usage"] = {k: record.get(k, 0) for k in ("model_calls", "input_tokens", "output_tokens")}
    if problem:
        view["note"] = problem
    return _json(view)


DEFAULT_LIST_LIMIT = 50  # tasks list_async_tasks shows at most when not given a limit
MAX_LIST_LIMIT = 200  # the largest limit it accepts
DEFAULT_LIST_TOTAL_CHARS = 12_000  # bound on one answer (as on a notice): rows that do not fit are paged to


def listed(records: Iterable[Mapping[str, Any]], status: str | None, offset: int = 0,
           limit: int = DEFAULT_LIST_LIMIT, total_chars: int = DEFAULT_LIST_TOTAL_CHARS) -> str:
    """One page of tasks as the model sees it: newest first, at most ``limit`` JSON rows from ``offset`` in about
    ``total_chars`` (at least one), then the next page's ``offset`` if there are more."""
    rows = [{"task_id": r["id"], "agent_type": r["agent_type"], "status": r["status"],
             "description": clip(r.get("description") or "", _PREVIEW),
             **({"note": r["note"]} if r.get("note") else {})}
            for r in sorted(records, key=lambda r: r.get("created_at") or 0, reverse=True)]
    if not rows:
        return f"No background tasks with status {status!r}." if status else "No background tasks."
    if offset >= len(rows):
        return f"No background tasks from offset {offset}: there are {len(rows)}."
    page: list[str] = []
    size = 2  # the brackets
    for row in rows[offset:offset + limit]:
        text = json.dumps(row)
        if page and size + len(text) + 2 > total_chars - 160:  # room for the closing line
            break
        page.append(text)
        size += len(text) + 2
    body = "[" + ", ".join(page) + "]"
    after = offset + len(page)
    if after >= len(rows):
        return body
    return (f"{body}\nShown: tasks {offset + 1}-{after} of {len(rows)}, newest first; "
            f"{len(rows) - after} older not shown: call list_async_tasks with offset={after} for the next page.")


def notice(records: Iterable[Mapping[str, object]], result_chars: int,
           total_chars: int = DEFAULT_NOTICE_TOTAL_CHARS,
           unreachable: Iterable[Mapping[str, Any]] = ()) -> str:
    """The one message announcing every task that finished (or needs approval) since the last call, results clipped
    to ``result_chars`` and the whole to ``total_chars``; ``unreachable`` tasks named once, briefly."""
    lines = [_notice_line(r, result_chars) for r in records]
    by_note: dict[str, list[str]] = {}
    for r in unreachable:
        by_note.setdefault(r["note"], []).append(r["id"])
    for note, ids in by_note.items():
        named = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        lines.append(f"- not checked ({named}): {note}")
    return capped_notice("Background task updates:", lines, total_chars)


def capped_notice(head: str, lines: list[str], total_chars: int) -> str:
    """``head`` and the whole ``lines`` that fit in ``total_chars``, then how many were left out (a first line too
    long is clipped, not dropped)."""
    def rest(n: int) -> str:
        return (f"...and {n} more update{'s' if n != 1 else ''} not shown here: "
                "call list_async_tasks to see them and check_async_task for each result.")

    kept = [head]
    size = len(head)
    for i, line in enumerate(lines):
        left = len(lines) - i - 1
        reserve = len(rest(left)) + 1 if left else 0
        room = total_chars - size - 1 - reserve
        if len(line) > room and len(kept) == 1 and room >= 40:
            line = clip(line, room)
        if len(line) > room:
            kept.append(rest(len(lines) - i))
            break
        kept.append(line)
        size += 1 + len(line)
    return "\n".join(kept)


def _notice_line(r: Mapping[str, Any], result_chars: int) -> str:
    """One task's line; never raises, whatever a hand-edited record or a child's interrupt holds."""
    try:
        head = f"- {r['id']} ({r['agent_type']}): {r['status']}"
        if r["status"] == "completed":
            result = r.get("result") or ""
            more = " [truncated; check_async_task has the full result]" if len(result) > result_chars else ""
            return f"{head}. Result: {clip(result, result_chars)}{more}"
        if r["status"] == "waiting_for_approval":
            request = clip(_json(r.get("approval_request")), result_chars)
            return f"{head}. It asks for approval: {request}. Answer with update_async_task."
        return f"{head}. {clip(r['error'], result_chars)}" if r.get("error") else f"{head}."
    except Exception:  # noqa: BLE001 - the notice runs before every model call: it must not stop the parent
        return f"- {clip(_text(r.get('id')), 200)}: {clip(_text(r.get('status')), 100)} " \
               "(its record could not be shown; call check_async_task)."


_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxother, _REPR.maxlevel = 500, 200, 8


def _json(value: object) -> str:
    """``value`` as JSON; what JSON cannot hold (a tuple key, a cycle, bytes) as bounded text instead."""
    try:
        return json.dumps(value, default=_text)
    except Exception:  # noqa: BLE001 - a key JSON refuses, a cycle, a nesting too deep: shown as text
        return _text(value)


def _text(value: object) -> str:
    """A bounded ``repr`` that never raises (long and deep values are cut short)."""
    try:
        return _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__: its type still says what it was
        return f"<{type(value).__name__}>"


# The six tools. They carry the delegation tag, so no child ever holds them.

REMOTE_START_LEFT_OPEN = (
    "The run stopped before this start was answered. If the task reached its server it is found there "
    "and reported in a notice; if not, it is recorded lost.")


class TaskIdInput(BaseModel):
    """Arguments of the tools that act on one task."""

    task_id: str = Field(description="The task id that start_async_task returned.")


class UpdateTaskInput(TaskIdInput):
    """Arguments of ``update_async_task``."""

    message: str = Field(default="", description="The new instruction, the follow-up, or the reason for a "
                                                 "decision.")
    decision: Literal["approve", "reject"] | None = Field(default=None, description=(
        "Only for a task waiting for approval: approve or reject what it asked; "
        "message is then the reason the task sees."))


class ListTasksInput(BaseModel):
    """Arguments of ``list_async_tasks``."""

    status: AsyncTaskStatus | None = Field(None, description="Only tasks with this status; all tasks when omitted.")
    offset: int = Field(default=0, ge=0, description="Skip this many (newest) tasks: the next page's offset.")
    limit: int = Field(default=DEFAULT_LIST_LIMIT, ge=1, le=MAX_LIST_LIMIT,
                       description="Show at most this many tasks.")


def background_tools(mw: BackgroundSubagentMiddleware) -> list[StructuredTool]:
    """The six tools, bound to ``mw``'s handlers."""
    table: list[tuple[str, Callable[..., Coroutine[object, None, Command[str]]], type[BaseModel], str]] = [
        ("start_async_task", mw._handle_start, TaskToolInput, START_DESCRIPTION),
        ("check_async_task", mw._handle_check, TaskIdInput, CHECK_DESCRIPTION),
        ("update_async_task", mw._handle_update, UpdateTaskInput, UPDATE_DESCRIPTION),
        ("cancel_async_task", mw._handle_cancel, TaskIdInput, CANCEL_DESCRIPTION),
        ("list_async_tasks", mw._handle_list, ListTasksInput, LIST_DESCRIPTION),
        ("retry_async_task", mw._handle_retry, TaskIdInput, RETRY_DESCRIPTION),
    ]
    tools = []
    for name, handle, schema, text in table:
        func, coro = _faces(mw, handle, start=name == START_TOOL_NAME)
        for face in (func, coro):  # its annotations evaluated once (LangChain reads a tool's hints on every call)
            face.__annotations__ = get_type_hints(face, include_extras=True)
        # A start whose arguments are invalid (a blank description) is a delegation that never ran: recorded.
        tools.append((_RecordedStart if name == START_TOOL_NAME else StructuredTool).from_function(
            func=func, coroutine=coro, name=name, description=text,
            args_schema=schema, infer_schema=False, metadata={DELEGATION_TOOL_TAG: True}))
    return tools


def _faces(mw: BackgroundSubagentMiddleware, handle: Callable[..., Coroutine[object, None, Command[str]]], *,
           start: bool) -> tuple[Callable[..., Command[str]], Callable[..., Awaitable[Command[str]]]]:
    """A tool's sync and async faces, each naming `runtime: ToolRuntime` (how the tool node knows to inject it)."""
    loop = mw.runtime

    def plan(runtime: ToolRuntime, args: dict[str, Any]) -> Generator[Coroutine[object, None, Command[str]],
                                                                      Command[str], Command[str]]:
        made = mw._start_now(runtime, **args) if start else None
        try:
            command = made or (_closed(runtime) if loop.closed else (yield handle(runtime, **args)))
        except RuntimeClosed as exc:
            return _closed(runtime, exc)
        update = command.update if start and isinstance(command.update, Mapping) else {}
        for record in (update.get(ASYNC_LEDGER_KEY) or {}).values():  # a turn of many starts is seen advancing
            runtime.stream_writer({STARTED_EVENT: {k: record.get(k) for k in STARTED_FIELDS}})
        return command

    def face(runtime: ToolRuntime, **args: Any) -> Command[str]:
        return drive(plan(runtime, args), loop.run)

    async def aface(runtime: ToolRuntime, **args: Any) -> Command[str]:
        return await adrive(plan(runtime, args), loop.arun)

    return face, aface


class _RecordedStart(RecordedTool):
    """``start_async_task``: a call with invalid arguments gets its error result and a record, as ``task``'s does."""

    def _recorded(self, record: dict[str, object]) -> dict[str, object]:
        return {ASYNC_LEDGER_KEY: {record["id"]: as_background_record(record)}}


def _not_notice(message: object) -> bool:
    return not is_notice(message)


def _closed(runtime: ToolRuntime, why: BaseException | None = None) -> Command[str]:
    """The answer of every background tool once the runtime is closed (or its loop stalls): an error, never a crash."""
    reason = safe_text(why, 300) if why is not None else "the background runtime was closed"
    return _reply(runtime, f"Background tasks are unavailable: {reason}.", error=True)


# What each tool does, as one ``Command``: a ``ToolMessage`` and the records it changed. An unknown id or a
# forbidden operation is an error result, never raised.

def _on_task(act: Callable[..., Awaitable[Command[str]]]) -> Callable[..., Coroutine[object, None, Command[str]]]:
    """A handler of a tool acting on one task, called with the task's ledger record in place of its ``task_id``."""
    async def handle(self: BackgroundSubagentMiddleware, runtime: ToolRuntime, task_id: str,
                     **args: Any) -> Command[str]:
        ledger, held = ledger_of(runtime.state), runtime.state.get(ASYNC_LEDGER_KEY)
        record = ledger.get(task_id)
        if record is None and isinstance(held, Mapping) and task_id in held:
            return _reply(runtime, f"Task {brief(task_id)} cannot be acted on: its ledger record is damaged "
                          f"({record_problem(task_id, held[task_id])}).", error=True)
        if record is None:
            # deepagents' words, which a model (or a test) used to them looks for; then the ids it may mean.
            ids = list(ledger)
            shown = ", ".join(safe_text(i, 80) for i in ids[-_IDS_LISTED:])
            more = (f" (the newest {_IDS_LISTED} of {len(ids)}; list_async_tasks shows all)"
                    if len(ids) > _IDS_LISTED else "")
            known = f"Known task ids{more}: {shown}." if ids else "Known task ids: none yet."
            return _reply(runtime, f"No tracked task found for task_id: {brief(task_id)}. {known}", error=True)
        try:
            return await act(self, runtime, record, **args)
        except TaskStateError as exc:
            return _reply(runtime, f"Cannot do that: {exc}", error=True)
        except Exception as exc:  # noqa: BLE001 - a runner failure fails this call alone
            return _reply(runtime, f"Task {task_id}: the operation failed: {_reason(exc)}", error=True)

    return handle


_IDS_LISTED = 20  # an unknown id's answer names at most this many known ones (the newest): a few, not all


def ledger_of(state: Mapping[str, object]) -> dict[str, dict[str, object]]:
    """A copy of the records of the ``async_tasks`` ledger in ``state`` that can be acted on (``usable_records``)."""
    ledger = state.get(ASYNC_LEDGER_KEY)
    return usable_records(ledger) if isinstance(ledger, Mapping) else {}


def _reason(exc: BaseException) -> str:
    if isinstance(exc, (TaskStateError, UnknownSubagent)):
        return str(exc)
    return f"{type(exc).__name__}: {str(exc).strip() or '(no message)'}"


STARTED_EVENT = "background_task_started"
"""The key of the custom stream event (``stream_mode="custom"``) each start of a task writes, from the tool's thread
(whose run owns the stream)."""
STARTED_FIELDS = ("id", "agent_type", "status", "tool_call_id")  # of the started task's record, in its event


def _failed_start(runtime: ToolRuntime, call: TaskCall, exc: Exception) -> Command[str]:
    return _refused_start(runtime, call, f"Subagent '{call.subagent_type}' failed: {_reason(exc)}",
                          "invalid_call" if isinstance(exc, UnknownSubagent) else "refused")


def _refused_start(runtime: ToolRuntime, call: TaskCall, reason: str, stop_reason: StopReason) -> Command[str]:
    """A start that ran no child gets a record, as a refused ``task`` call does (:func:`refused_outcome`)."""
    record = as_background_record(refused_outcome(call, reason, stop_reason).record)
    return _reply(runtime, reason, record, error=True)


def _reply(runtime: ToolRuntime, content: str, record: Mapping[str, Any] | None = None, *,
           updates: Mapping[str, object] | None = None, error: bool = False) -> Command[str]:
    message = ToolMessage(content=content, tool_call_id=runtime.tool_call_id or "",
                          status="error" if error else "success")
    ledger = dict(updates or {})
    if record is not None:
        ledger[record["id"]] = dict(record)
    # Written even empty: a run that calls these tools is not touched at its start (touch_if_quiet), so a thread
    # that only lists tasks would never write its ledger, each load walking back further.
    return Command(update={"messages": [message], ASYNC_LEDGER_KEY: ledger})


class AsyncTaskLedgerState(AgentState):
    """Parent state with the ledger of background tasks."""

    async_tasks: NotRequired[Annotated[dict[str, dict[str, object]], LedgerChannel(dict, merge_async_records)]]


class BackgroundSubagentMiddleware(AgentMiddleware):
    """Adds the background-task tools, the ledger, and completion notices.

    Args:
        subagents: :class:`subagents.SubagentSpec`, :class:`subagents.CompiledSubagent`,
            :class:`subagents.RemoteSubagentSpec` or dicts (one with ``graph_id`` is remote).
        model: the model local children inherit; default: the parent's.
        tools: the tools local children inherit; default: the parent's.
        model_middleware: the parent's middleware, as for :class:`~middleware.SubAgentMiddleware`: its approvals
            and data policy govern every local child, its model-level ones wrap the calls of local children that
            inherit the parent's model.
        private_state_keys: more keys that never reach a local child.
        system_prompt: text placed before the agents block (``None``: none).
        settings: the :class:`subagents.DelegationSettings` the rest comes from, as for
            :class:`SubAgentMiddleware`: its ``background`` group, ``max_delegations`` (one count with ``task``'s
            calls), ``budget`` (it covers local children), and what local children are built with (transcripts go
            to JSONL only, never a store).

    A spec without ``graph_id`` runs in this process through the same runner as ``task``; one with ``graph_id`` on a
    LangGraph Server. A child hands back its answer, never state keys (the parent has moved on by then). Finished
    tasks are announced before the parent's next model call; the ledger (of :class:`AsyncTaskRecord`, merged field
    by field) and each local outcome survive a restart, given a checkpointer. ``close()``, or dropping the
    middleware, closes its runtime. A :class:`SubAgentMiddleware` in ``model_middleware`` already lists its agents
    in ``<available_agents>``: they are not listed again here.

    Example::

        agent = create_agent("openai:gpt-4.1-mini", tools=[search], checkpointer=SqliteSaver(conn), middleware=[
            BackgroundSubagentMiddleware(subagents=[
                {"name": "researcher", "description": "Finds facts.", "tools": ["search"]},
                {"name": "crawler", "description": "Crawls.", "graph_id": "crawler", "url": "https://x.example"},
            ], settings=DelegationSettings.of(max_background_tasks=4))])
    """

    state_schema = AsyncTaskLedgerState
    child_policy = ChildPolicy(delegates=True)  # a child never takes it: one level

    def __init__(self, subagents: Sequence[Any] = (), *, model: BaseChatModel | str | None = None,
                 tools: Sequence[BaseTool | Callable[..., Any] | dict[str, Any]] | None = None,
                 model_middleware: Sequence[AgentMiddleware] | None = None,
                 private_state_keys: frozenset[str] = frozenset(), system_prompt: str | None = BACKGROUND_INSTRUCTIONS,
                 settings: DelegationSettings | None = None) -> None:
        super().__init__()
        # JSONL transcripts only: background children outlive the run's store.
        settings = (settings or DelegationSettings()).updated(transcript_store=None)
        shared, background = settings.background.background_runtime, settings.background
        if shared is not None and not isinstance(shared, BackgroundRuntime):
            raise InvalidArgumentType(f"BackgroundSubagentMiddleware: background_runtime must be a BackgroundRuntime, "
                            f"not {type(shared).__name__}")
        self.runtime = shared if shared is not None else BackgroundRuntime()
        if shared is None:  # ours: closed with us, even if nobody calls close()
            self._finalizer = weakref.finalize(self, self.runtime.close_soon)
        local, remote = _split(subagents)
        local = with_general_purpose(local, settings.definitions.general_purpose, taken=(s.name for s in remote))
        # Each child calls copies of its models with clients of the runtime's loop (see LoopModels).
        inbox, own_models = SteeringInbox(self.runtime.inboxes), OwnLoopModels(self.runtime.models)
        steerable = [s.model_copy(update={"middleware": (*s.middleware, inbox, own_models)})
                     if isinstance(s, SubagentSpec) else s for s in local]
        # A child's model-call wraps of ours run as one, or not at all where idle (fused_model_calls).
        options = BuildOptions(settings.definitions, settings.definitions.skills(), EXCLUDED_STATE_KEYS,
                               own_model=self.runtime.models.own, join_model_calls=background_child_middleware)
        floor = parent_floor(type(self).__name__, model_middleware, steerable)
        self.registry = SubagentRegistry(steerable, options=options, inherited_middleware=floor)
        self.tasks = BackgroundTasks(self.registry, remote, max_concurrent=background.max_background_tasks,
                                     excluded_keys=EXCLUDED_STATE_KEYS, private_keys=frozenset(private_state_keys),
                                     settings=settings, runtime=self.runtime)
        self.parent_model = ParentModel(model)
        self._tools = None if tools is None else list(tools)
        self.background = background
        self._orphan_search = OrphanSearch(self.tasks.remote.specs, START_TOOL_NAME)
        agents = [(s.name, s.description) for s in [*local, *remote]]
        skip = {n for mw in model_middleware or () if isinstance(mw, SubAgentMiddleware) for n in mw.registry.names}
        block = available_agents_block(a for a in agents if a[0] not in skip)
        self.prompt_block = "\n\n".join(p for p in (system_prompt, block) if p) if agents else ""
        self.tasks.local.on_settled.append(ThreadCatchUp(self.tasks, ASYNC_LEDGER_KEY))
        limit = settings.limits.max_delegations
        self.delegation_limit = DelegationLimit(limit) if limit is not None else None
        self.tools = background_tools(self) if agents else []

    @property
    def system_prompt(self) -> str | None:
        """The text added to the parent's system prompt (the instructions, then the agents), as deepagents names it."""
        return self.prompt_block or None

    def close(self) -> None:
        """Close the runtime (injected or not): running tasks are recorded ``lost``, the loop stops."""
        self.runtime.close()

    def answer_approval(self, state: Mapping[str, object], task_id: str, decision: Literal["approve", "reject"],
                        reason: str = "") -> dict[str, object]:
        """:func:`subagents.background.answer_approval` given the parent's ``state`` (whose ``async_tasks`` holds
        the task) rather than its graph and config: ``middleware.answer_approval(out, task_id, "approve")``."""
        runtime, answering = approval_answer(state, task_id, decision, reason)
        return runtime.run(answering)[0]

    def _call(self, runtime: ToolRuntime, description: str, subagent_type: str) -> TaskCall:
        return TaskCall.from_runtime(runtime, subagent_type, description, parent_model=self.parent_model.model,
                                     parent_tools=self._tools)

    def _refusal(self, runtime: ToolRuntime) -> str | None:
        """Why a run more (a start, retry, follow-up) is past ``max_delegations`` (one count with ``task``'s calls)."""
        limit = self.delegation_limit
        return None if limit is None else limit.refusal(runtime.state.get("messages", ()), runtime.tool_call_id)

    def _start_now(self, runtime: ToolRuntime, description: str, subagent_type: str) -> Command[str] | None:
        """The start, made in the tool's thread without waiting for the loop; ``None``: :meth:`_handle_start`."""
        call = self._call(runtime, description, subagent_type)
        if (reason := self._refusal(runtime)) is not None:
            return _refused_start(runtime, call, reason, "refused")
        if self.runtime.closed:
            return None  # the loop path answers "unavailable"
        try:
            record = self.tasks.start_soon(call, runtime.state.get(ASYNC_LEDGER_KEY) or {})
        except RuntimeClosed:
            return None
        except Exception as exc:  # noqa: BLE001 - a refused start fails this call alone
            return _failed_start(runtime, call, exc)
        return None if record is None else _reply(runtime, started(record), record)

    async def _handle_start(self, runtime: ToolRuntime, description: str, subagent_type: str) -> Command[str]:
        """The start on the loop, where :meth:`_start_now` could not make it (and did not refuse it)."""
        call = self._call(runtime, description, subagent_type)
        try:  # the ledger read only: no copy per start
            record = await self.tasks.start(call, runtime.state.get(ASYNC_LEDGER_KEY) or {})
        except Exception as exc:  # noqa: BLE001 - a refused start fails this call alone
            return _failed_start(runtime, call, exc)
        return _reply(runtime, started(record), record)

    @_on_task
    async def _handle_check(self, runtime: ToolRuntime, record: Mapping[str, object]) -> Command[str]:
        current, problem = await self.tasks.check(record)
        if current["status"] in NOTEWORTHY_STATUSES:
            current["announced"] = True  # the model has now seen how it ended
        return _reply(runtime, checked(current, problem), current)

    @_on_task
    async def _handle_update(self, runtime: ToolRuntime, record: Mapping[str, Any], message: str = "",
                            decision: str | None = None) -> Command[str]:
        if (self.delegation_limit is not None and (await self.tasks.check(record))[0]["status"] not in (
                *ACTIVE_STATUSES, "waiting_for_approval") and (reason := self._refusal(runtime)) is not None):
            return _reply(runtime, reason, error=True)  # a follow-up to a finished task is a run more
        call = self._call(runtime, "", record["agent_type"])
        current, what = await self.tasks.update(record, message, call, decision, by_model=True)
        return _reply(runtime, f"Task {record['id']} ({current['status']}): {what}.", current)

    @_on_task
    async def _handle_cancel(self, runtime: ToolRuntime, record: Mapping[str, object]) -> Command[str]:
        return _reply(runtime, f"Cancelled background task {record['id']}.", await self.tasks.cancel(record))

    @_on_task
    async def _handle_retry(self, runtime: ToolRuntime, record: Mapping[str, Any]) -> Command[str]:
        if (reason := self._refusal(runtime)) is not None:
            return _reply(runtime, reason, error=True)
        current = await self.tasks.retry(record, self._call(runtime, "", record["agent_type"]))
        return _reply(runtime, f"Retrying background task {record['id']} (attempt {current['attempt']}).", current)

    async def _handle_list(self, runtime: ToolRuntime, status: str | None = None, offset: int = 0,
                          limit: int = DEFAULT_LIST_LIMIT) -> Command[str]:
        ledger = ledger_of(runtime.state)
        try:
            updates = await self.tasks.refresh(ledger)
        except Exception:  # noqa: BLE001 - a status poll must never stop the parent: list what is known
            updates = {}
        merged = merge_async_records(ledger, updates)
        rows = [r for r in merged.values() if status is None or r["status"] == status]
        return _reply(runtime, listed(rows, status, offset, limit), updates=updates)

    # A turn after a stopped run: its open calls answered (else a ledger the thread stopped writing touched).
    def before_agent(self, state: AgentState[ResponseT], runtime: Runtime[ContextT]) -> dict[str, object] | None:
        if not (calls := self._open_calls(state)):
            return touch_if_quiet(state, ASYNC_LEDGER_KEY, {t.name for t in self.tools}, is_turn=_not_notice)
        saved = _saved_checkpoints(calls) if any(c.get("name") == START_TOOL_NAME for c in calls) else []
        with contextlib.suppress(RuntimeClosed):  # closed meanwhile: nothing to report
            return self.runtime.run(self._answer_open(state, calls, get_config(), saved))
        return None

    async def abefore_agent(self, state: AgentState[ResponseT], runtime: Runtime[ContextT]) -> dict[str, object] | None:
        if not (calls := self._open_calls(state)):
            return touch_if_quiet(state, ASYNC_LEDGER_KEY, {t.name for t in self.tools}, is_turn=_not_notice)
        saved = await _asaved_checkpoints(calls) if any(c.get("name") == START_TOOL_NAME for c in calls) else []
        with contextlib.suppress(RuntimeClosed):
            return await self.runtime.arun(self._answer_open(state, calls, get_config(), saved))
        return None

    def _open_calls(self, state: AgentState[ResponseT]) -> list[ToolCall]:
        names = {t.name for t in self.tools}
        return [c for c in open_calls(state.get("messages") or ()) if c.get("name") in names]

    async def _answer_open(self, state: AgentState[ResponseT], calls: Sequence[Mapping[str, Any]],
                           config: RunnableConfig, saved: Sequence[CheckpointTuple] = ()) -> dict[str, object]:
        """Each open call answered (:func:`answer_open_calls`): a local start with the record of its task here or
        its outcome, else ``lost``; a remote one left to orphan adoption, which asks its server (it knows)."""
        thread_id = (config.get("configurable") or {}).get("thread_id")
        ledger = ledger_of(state)
        db = await checkpoint_db(config)
        local = {str(c["id"]) for c in calls if c.get("name") == START_TOOL_NAME and (
            (c.get("args") or {}).get("subagent_type") if isinstance(c.get("args"), Mapping) else None)
            not in self.tasks.remote.specs}

        def recovered(call: Any, args: Mapping[str, Any], left: tuple[str, str | None]) -> Answered:
            agent_type = str(args.get("subagent_type") or "(unknown)")
            known = next((r for r in ledger.values() if r.get("tool_call_id") == call["id"]), None)
            if call.get("name") != START_TOOL_NAME:
                return lost_answer(call), None
            if known is not None:
                return ToolMessage(started(known), tool_call_id=call["id"], name=START_TOOL_NAME), None
            if agent_type in self.tasks.remote.specs:
                return lost_answer(call, REMOTE_START_LEFT_OPEN), None
            record = self._recovered(thread_id, agent_type, call, args, db, left)
            return (lost_answer(call) if record["status"] == "lost" else
                    ToolMessage(started(record), tool_call_id=call["id"], name=START_TOOL_NAME)), record

        answers, kept = answer_open_calls(calls, saved, recovered, kept=local, ledger_key=ASYNC_LEDGER_KEY,
                                          sessions_dir=self.tasks.local.sessions_dir, ledger=ledger,
                                          thread_id=thread_id)
        update: dict[str, object] = {"messages": with_answers(state.get("messages") or (), answers)}
        records = {task_id: dict(r) for task_id, r in (kept.get(ASYNC_LEDGER_KEY) or {}).items()
                   if isinstance(r, Mapping) and r.get("tool_call_id") in answers}
        if records:
            update[ASYNC_LEDGER_KEY] = records
        return update

    def _recovered(self, thread_id: Any, agent_type: str, call: Mapping[str, object], args: Mapping[str, object],
                   db: str | None, left: tuple[str, str | None]) -> dict[str, Any]:
        call_id = str(call.get("id"))
        task_id, transcript = left
        record = AsyncTaskRecord(id=task_id, agent_type=agent_type, runner="local",
                                 status="lost", description=str(args.get("description") or ""),
                                 tool_call_id=call_id, created_at=now(), outcome_db=db).model_dump()
        task = self.tasks.local.find_by_call(thread_id, call_id)
        if task is not None:  # it runs (or ran) in this process: the parent's step was stopped
            return {**record, **task.fields, "id": task.id}
        stored = self.tasks.local.stored_by_call(thread_id, call_id, db)
        if stored and isinstance(stored.get("id"), str):
            # A file in the working folder is data anyone could have written: only a record's own fields,
            # and only as a valid record, with this call's id and agent, never what the file claims them to be.
            fields = {k: v for k, v in stored.items() if k in AsyncTaskRecord.model_fields}
            candidate = {**record, **fields, "announced": False, "tool_call_id": call_id,
                         "agent_type": agent_type, "runner": "local"}
            try:
                return AsyncTaskRecord.model_validate(candidate).model_dump()
            except ValidationError:
                log.warning("a stored outcome for call %r is not a task record; the task is recorded lost", call_id)
        return {**record, **lost(LOST_REASON, transcript)}

    def before_model(self, state: AgentState[ResponseT], runtime: Runtime[ContextT]) -> dict[str, object] | None:
        with contextlib.suppress(RuntimeClosed):
            return None if (work := self._catch_up_due(state)) is None else self.runtime.run(work)
        return None

    async def abefore_model(self, state: AgentState[ResponseT], runtime: Runtime[ContextT]) -> dict[str, object] | None:
        with contextlib.suppress(RuntimeClosed):
            return None if (work := self._catch_up_due(state)) is None else await self.runtime.arun(work)
        return None

    def _catch_up_due(self, state: AgentState[ResponseT]) -> Coroutine[object, None, dict[str, object] | None] | None:
        # Remote starts with no ledger record, not yet looked for in this process.
        orphans = self._orphan_search.due(state.get("messages") or (), ledger_of(state), _thread_id(),
                                          failed=_errors(state, left_open=False)) if self.tasks.remote.specs else None
        return self._catch_up(state, orphans) if self._due(state) or orphans else None

    def _due(self, state: AgentState[ResponseT]) -> bool:
        return any(
            r.get("status") in LIVE_STATUSES
            or (self.background.notify and r.get("status") in NOTEWORTHY_STATUSES and not r.get("announced"))
            for r in ledger_of(state).values()
        )

    async def _catch_up(self, state: AgentState[ResponseT],
                        orphans: tuple[str, dict[str, tuple[str, str]]] | None = None) -> dict[str, object] | None:
        ledger = ledger_of(state)
        adopted = await adopt_orphans(self.tasks.remote, *orphans, left_open=_errors(state, left_open=True),
                                      search=self._orphan_search) if orphans else {}
        ledger.update(adopted)
        try:
            updates = await self.tasks.refresh(ledger, just_started=_just_started(state, ledger))
        except Exception:  # noqa: BLE001 - a status poll must never stop the parent
            updates = {}
        for task_id, record in adopted.items():
            updates[task_id] = {**record, **updates.get(task_id, {})}
        merged = merge_async_records(ledger, updates)
        out: dict[str, object] = {}
        if self.background.notify:
            due = [r for r in merged.values()
                   if r["status"] in NOTEWORTHY_STATUSES and not r.get("announced")]
            cut_off = [merged[i] for i, f in updates.items() if f.get("note") and not ledger.get(i, {}).get("note")]
            if due or cut_off:
                for r in due:
                    updates.setdefault(r["id"], {})["announced"] = True
                text = notice(due, self.background.notice_result_chars, self.background.notice_total_chars, cut_off)
                out["messages"] = [notice_message(text)]  # no user turn: resets no cap, forces no task
        if updates:
            out[ASYNC_LEDGER_KEY] = updates
        return out or None

    def _with_block(self, request: ModelRequest[ContextT]) -> ModelRequest[ContextT]:
        self.parent_model.observe(request)
        if self.delegation_limit is not None:
            request = self.delegation_limit.withdrawn_when_exhausted(request)
        return with_prompt_block(request, self.prompt_block)

    def _answer_invalid(self, response: ModelCallResult[ResponseT]) -> ModelCallResult[ResponseT]:
        """Background-tool calls with unreadable arguments: answered, recorded, retried."""
        names = [t.name for t in self.tools]
        return answered_response(response, names, ASYNC_LEDGER_KEY, as_record=as_background_record)

    def wrap_model_call(
        self, request: ModelRequest[ContextT], handler: Callable[[ModelRequest[ContextT]], ModelResponse[ResponseT]]
    ) -> ModelCallResult[ResponseT]:
        return self._answer_invalid(handler(self._with_block(request)))

    async def awrap_model_call(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], Awaitable[ModelResponse[ResponseT]]],
    ) -> ModelCallResult[ResponseT]:
        return self._answer_invalid(await handler(self._with_block(request)))


def _split(subagents: Sequence[AnySpec | RemoteSubagentSpec | Mapping[str, Any]]
           ) -> tuple[list[AnySpec], list[RemoteSubagentSpec]]:
    local: list[AnySpec] = []
    remote: list[RemoteSubagentSpec] = []
    for spec in subagents:
        if isinstance(spec, RemoteSubagentSpec):
            remote.append(spec)
        elif isinstance(spec, Mapping) and "graph_id" in spec:
            try:
                remote.append(RemoteSubagentSpec.model_validate(dict(spec)))
            except ValidationError as exc:
                label = f"remote subagent {spec.get('name', '<unnamed>')!r}"
                raise SpecError(describe_validation_error(exc, label)) from None
        else:
            local.append(coerce_spec(spec))
    return local, remote


def _just_started(state: AgentState[ResponseT], ledger: Mapping[str, Mapping[str, object]]) -> set[str]:
    """The ids of the tasks whose start calls the step just before answered (the messages' last tool results)."""
    answered = set()
    for message in reversed(state.get("messages") or ()):
        if not isinstance(message, ToolMessage):
            break
        answered.add(message.tool_call_id)
    return {task_id for task_id, r in ledger.items() if r.get("tool_call_id") in answered} if answered else set()


def _errors(state: AgentState[ResponseT], *, left_open: bool) -> set[str]:
    """The calls answered with an error: the remote starts a stopped run left open (``left_open``), or the others."""
    return {m.tool_call_id for m in state.get("messages") or () if isinstance(m, ToolMessage)
            and m.status == "error" and (m.content == REMOTE_START_LEFT_OPEN) == left_open}


def _thread_id() -> str | None:
    try:
        return (get_config().get("configurable") or {}).get("thread_id")
    except RuntimeError:  # not inside a run
        return None


# deepagents' names and arguments: a deepagents user changes only the import.

AsyncSubAgentState = AsyncTaskLedgerState
"""deepagents' name for the state of the background-task ledger (``async_tasks``)."""


class AsyncSubAgentMiddleware(BackgroundSubagentMiddleware):
    """deepagents' ``AsyncSubAgentMiddleware``: background tasks on remote servers only.

    Args:
        async_subagents: remote specs (``name``, ``description``, ``graph_id``, ``url``, ``headers``); one or more.
        system_prompt: the tools' instructions, placed in the system prompt.
        **kwargs: any other argument of :class:`~middleware.BackgroundSubagentMiddleware`.

    Example::

        AsyncSubAgentMiddleware(async_subagents=[{"name": "r", "description": "R.", "graph_id": "r",
                                                  "url": "http://127.0.0.1:2024"}])
    """

    def __init__(self, *, async_subagents: Sequence[Mapping[str, object]],
                 system_prompt: str | None = BACKGROUND_INSTRUCTIONS, **kwargs: Any) -> None:
        if not async_subagents:
            raise SpecError("AsyncSubAgentMiddleware(): argument 'async_subagents': give at least one async subagent")
        # deepagents' middleware has only the remote agents.
        kwargs.setdefault("settings", DelegationSettings.of(general_purpose=False))
        super().__init__(list(async_subagents), system_prompt=system_prompt, **kwargs)
