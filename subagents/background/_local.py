"""The local background runner: subagents running in this process, outliving the parent's turn.

Each run goes through :meth:`subagents.TaskRunner.arun` as a ``task`` call does, on the runtime's loop; a task adds
its conversation (:class:`ChildSession`), an owner (``lost`` only once provably gone), an outcome stored as it
settles, and a cap (tasks beyond ``max_concurrent`` stay ``pending``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, cast

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.pregel import Pregel
from langgraph.types import Command

from subagents._boundary import running_in
from subagents._errors import RuntimeClosed, RuntimeStalled
from subagents._metering import TaskMeter
from subagents._outcome import TaskCall, lost
from subagents._registry import SubagentRegistry
from subagents._runner import ConcurrencyLimit, TaskRunner
from subagents._settings import DelegationSettings
from subagents._transcripts import jsonl_path
from subagents.background._ledger import ACTIVE_STATUSES, LIVE_STATUSES, SETTLED_STATUSES, now
from subagents.background._runtime import (
    INBOX_METADATA_KEY,
    LEASE_S,
    STEERING_PREFIX,
    BackgroundRuntime,
    Inboxes,
    OutcomeStore,
    Owner,
    OwnerState,
    operation_abandoned,
    outcome_for,
    owner_state,
    steering_message,
)
from subagents.definitions._permissions import pending_interrupts, resume_for


class ChildSession:
    """One background child's conversation on a checkpointer of its own, standing in for the child graph
    :class:`~subagents.TaskRunner` invokes: later runs send only their new messages, an approval resumes the paused
    run, and steering waiting as a run starts comes with its input."""

    def __init__(self, task_id: str, meter: TaskMeter, seed: list[Any] | None = None,
                 inboxes: Inboxes | None = None) -> None:
        self.task_id = task_id
        self.meter = meter
        self.inboxes = inboxes
        self.thread_id = f"background-{task_id}-{uuid.uuid4().hex[:8]}"
        self.graph: Any = None
        self.resume: Any = None
        self.interrupts: list[Any] = []
        self._seed = seed or []
        self.saver = InMemorySaver()  # the conversation, continued by follow-ups and approvals
        self._bound: tuple[Any, Any] | None = None
        self._last: Mapping[str, Any] | None = None

    async def ainvoke(self, inputs: Mapping[str, Any], config: Mapping[str, Any]) -> Any:
        if self.interrupts and self.resume is None and self._last is not None:
            # Paused for approval: nothing runs until the parent answers.
            return self._last
        run_config = {**config, "metadata": {**(config.get("metadata") or {}), INBOX_METADATA_KEY: self.task_id},
                      "callbacks": [*(config.get("callbacks") or []), self.meter],
                      "configurable": {"thread_id": self.thread_id}}
        payload: Any
        if self.resume is not None:
            payload, self.resume = Command(resume=self.resume), None
        elif self._last is None:
            payload = {**inputs, "messages": [*self._seed, *inputs["messages"]]}
        elif isinstance(self.graph, Pregel):
            payload = {"messages": list(inputs["messages"])}
        else:
            # A runnable with no checkpointer of ours: the session carries the history.
            payload = {"messages": [*self._last.get("messages", []), *inputs["messages"]]}
        if self.inboxes is not None and isinstance(payload, dict):
            # A child of one model call a run has no inbox node (see background_child_middleware).
            steering = [steering_message(m) for m in self.inboxes.take(self.task_id)]
            if steering:
                payload = {**payload, "messages": [*payload["messages"], *steering]}
        # Cleared before the run: one that raises leaves no earlier request shown as still waiting.
        self.interrupts = []
        if self._bound is None or self._bound[0] is not self.graph:  # a LangGraph graph gets our checkpointer
            pregel = isinstance(self.graph, Pregel)
            self._bound = (self.graph, self.graph.copy(update={"checkpointer": self.saver}) if pregel else self.graph)
        graph = self._bound[1]
        # A graph's checkpoints are for continuing it, never for a replay: written once, as the run stops.
        once = {"durability": "exit"} if isinstance(graph, Pregel) else {}
        result = await graph.ainvoke(payload, run_config, **once)
        self.interrupts = list(result.get("__interrupt__") or []) if isinstance(result, Mapping) else []
        self._last = result
        return result


LOST_REASON = ("the process running this task ended before it finished (for example a restart); "
               "call retry_async_task to run it again")
CLOSED_REASON = ("the background runtime running this task was closed before it finished; "
                 "call retry_async_task to run it again")
UNREAD_CHARS = 2000
"""How much of the steering a failed run never read its error quotes."""

log = logging.getLogger(__name__)

EndListener = Callable[[Mapping[str, Any]], Awaitable[list[str]]]
"""Told a task's record as it ends (completed, error, cancelled); returns feedback for its result (the root's
``SubagentStop`` hooks: :meth:`subagents.definitions.HookMiddleware.background_task_ended`)."""


def call_key(thread_id: Any, tool_call_id: str) -> str:
    """The second key of a task's outcome (a parent stopped before it saw the start answered knows only the call)."""
    return f"call:{thread_id}|{tool_call_id}"


def call_key_of(call: TaskCall) -> str | None:
    thread_id = (call.parent_config.get("configurable") or {}).get("thread_id")
    return call_key(thread_id, call.tool_call_id) if call.tool_call_id else None


@dataclasses.dataclass
class LocalTask:
    """A background task of one runtime."""

    id: str
    call: TaskCall
    session: ChildSession
    fields: dict[str, Any]
    runner: LocalTaskRunner
    job: asyncio.Task[None] | None = None
    cancelled_transcript: str | None = None

    def heard(self, event: Mapping[str, Any]) -> None:
        """The runner's events about this task's runs: a cancelled run names its transcript only there."""
        if event.get("type") == "subagent_task" and event.get("status") == "cancelled":
            self.cancelled_transcript = event.get("transcript")

    def set(self, **fields: Any) -> None:
        self.fields.update(fields, updated_at=now())

    def new_run(self, **fields: Any) -> None:
        """A new run of the task is to start (its first, a follow-up's): what the last one ended with is cleared."""
        self.set(status="pending", result=None, error=None, stop_reason=None, partial=False, finished_at=None,
                 announced=False, **fields)

    def usage(self) -> dict[str, Any]:
        return self.session.meter.usage()

    def abandon(self) -> None:
        """The runtime closes while the task has not settled: it is ``lost`` (and stored as such)."""
        if self.fields.get("status") not in SETTLED_STATUSES:
            self.runner._finish(self, **lost(CLOSED_REASON, self.cancelled_transcript), announced=False)

    def size(self) -> int:
        """Roughly the bytes the task holds: its record's text and its conversation's."""
        last = self.session._last
        messages = last.get("messages", []) if isinstance(last, Mapping) else []
        text = sum(len(v) for v in self.fields.values() if isinstance(v, str))
        return 512 + text + sum(len(getattr(m, "text", "") or "") + 200 for m in messages)


class LocalTaskRunner:
    """Starts, steers, follows up, cancels and retries background tasks in this process, on ``runtime``'s loop.

    ``on_end``: :data:`EndListener` s awaited before a completed or failed outcome is stored, told of a cancel
    without waiting, not of a close. ``on_settled``: given each settled task, on the loop (they must not block it).
    """

    def __init__(self, registry: SubagentRegistry, runtime: BackgroundRuntime, *, max_concurrent: int | None = None,
                 excluded_keys: frozenset[str] = frozenset(), private_keys: frozenset[str] = frozenset(),
                 settings: DelegationSettings | None = None) -> None:
        self.registry = registry
        self.runtime = runtime
        self.limit = ConcurrencyLimit(max_concurrent)
        # One runner for all tasks, as for `task` calls; the cap is ours (pending vs running).
        # A background task outlives the parent's turn: a Ctrl-C of the parent's run is not its end.
        self.runner = TaskRunner(registry, settings, excluded_keys=excluded_keys, private_keys=private_keys,
                                 stop_on_interrupt=False)
        self.sessions_dir = settings.observability.sessions_dir if settings is not None else None
        self.on_end: list[EndListener] = []
        self.on_settled: list[Callable[[LocalTask], None]] = []

    def find(self, task_id: str, owner: object = None) -> LocalTask | None:
        """The live entry for a task: in this runtime, or in its owner's if that is open in this process."""
        task = self.runtime.table.get(task_id)
        if task is not None:
            return cast("LocalTask", task)
        parsed = Owner.parse(owner)
        other = BackgroundRuntime.find(parsed.runtime) if parsed is not None else None
        return other.table.get(task_id) if other is not None else None

    def find_by_call(self, thread_id: Any, tool_call_id: str) -> LocalTask | None:
        """The task this runtime started for the parent's call ``tool_call_id`` in ``thread_id``."""
        tasks, key = cast("Iterator[LocalTask]", self.runtime.table.all()), call_key(thread_id, tool_call_id)
        return next((t for t in tasks if t.call.tool_call_id == tool_call_id and call_key_of(t.call) == key), None)

    def stored_by_call(self, thread_id: Any, tool_call_id: str, db: str | None) -> dict[str, Any] | None:
        """The outcome a task started by that call left in the thread's SQLite file (``None``: none)."""
        with contextlib.suppress(Exception):  # an unreadable file: nothing recovered
            return self.runtime.outcomes.file(db).load(call_key(thread_id, tool_call_id)) if db else None
        return None

    def owner_state(self, record: Mapping[str, Any]) -> OwnerState:
        """:func:`owner_state`, where one on another host is gone once its lease in the outcome file has lapsed."""
        state = owner_state(record.get("owner"), me=self.runtime.owner,
                            runtime_alive=lambda rid: BackgroundRuntime.find(rid) is not None)
        if state == "unknown" and record.get("outcome_db"):
            lease = self.runtime.outcomes.file(str(record["outcome_db"])).lease(record["id"])
            if lease is not None and (lease[0] != record.get("owner") or time.time() - lease[1] > LEASE_S):
                return "gone"
        return state

    def elsewhere(self, record: Mapping[str, Any]) -> str | None:
        """The live process (in words) that runs this task, when it is not this one; else ``None``."""
        if self.find(record["id"], record.get("owner")) is not None:
            return None
        # A live task is elsewhere unless its owner is provably gone; a stopped one only if it is provably alive.
        alive = ("alive", "unknown") if record.get("status") in LIVE_STATUSES else ("alive",)
        if self.owner_state(record) not in alive:
            return None
        owner = Owner.parse(record.get("owner"))
        return f"process {owner.pid} on {owner.host}" if owner is not None else None

    def refresh(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """The record's current fields as far as they can be known here (``lost`` if its owner is gone)."""
        task = self.find(record["id"], record.get("owner"))
        if task is not None:
            live = {**task.fields, **task.usage()}
            if live.get("status") == record.get("status") and \
                    live.get("approval_request") == record.get("approval_request"):
                # Only a new status or a new request to approve is news: ``announced`` is the ledger's.
                live.pop("announced", None)
            return live
        stored = outcome_for(record, self._store(record).load(record["id"]))
        if stored:
            return stored
        if record.get("status") in LIVE_STATUSES and self.owner_state(record) in ("gone", "self"):
            return {**lost(LOST_REASON, record.get("transcript")), "updated_at": now()}
        return {}

    async def start(self, task_id: str, call: TaskCall, *, seed: list[Any] | None = None,
                    attempt: int = 1, turns: int = 1, outcome_db: str | None = None) -> dict[str, Any]:
        """Launch a fresh conversation for ``call`` (on the loop, ``seed`` its history); the record's new fields."""
        if operation_abandoned():  # its caller was let go (the loop stalled) and answered "unavailable"
            raise RuntimeStalled("the caller stopped waiting for this start; it starts nothing")
        task = self._new(task_id, call, seed=seed, attempt=attempt, turns=turns, outcome_db=outcome_db)
        await self._admit(task)
        return dict(task.fields)

    def start_soon(self, task_id: str, call: TaskCall, *, outcome_db: str | None = None) -> dict[str, Any]:
        """:meth:`start` from another thread, not waiting for the loop; one a closing runtime never takes: ``lost``."""
        task = self._new(task_id, call, outcome_db=outcome_db)
        handed = self.runtime.submit(self._admit(task))  # raises RuntimeClosed if it is closed already
        handed.add_done_callback(lambda done: _never_taken(task, done))
        return dict(task.fields)

    def _new(self, task_id: str, call: TaskCall, *, seed: list[Any] | None = None, attempt: int = 1,
             turns: int = 1, outcome_db: str | None = None) -> LocalTask:
        """A task not yet in the table: its conversation and its record as it starts (``pending``)."""
        # Counts the child's calls across runs, priced as the runner's meter (which charges the budget) does.
        prices = self.runner.prices or (self.runner.budget.prices if self.runner.budget is not None else None)
        session = ChildSession(task_id, TaskMeter(prices=prices), seed, self.runtime.inboxes)
        task = LocalTask(task_id, call, session, {}, self)
        # Its JSONL file, named from the start: a record whose process ends before the task does still points at it.
        parent_thread = (call.parent_config.get("configurable") or {}).get("thread_id")
        path = jsonl_path(self.sessions_dir, parent_thread, task_id) if self.sessions_dir else None
        where = {"transcript": f"jsonl:{path}"} if path else {}
        task.new_run(owner=self.runtime.owner.name, thread_id=session.thread_id, attempt=attempt, turns=turns,
                     approval_request=None, started_at=None, outcome_db=outcome_db, **where, **task.usage())
        return task

    async def _admit(self, task: LocalTask) -> None:  # a coroutine, for submit
        """On the loop: the task enters the table and starts (or waits for a slot)."""
        self.runtime.inboxes.take(task.id)
        self.runtime.table[task.id] = task  # _launch revives it if it was settled
        self._launch(task, task.call)

    async def steer(self, record: Mapping[str, Any], message: str, call: TaskCall) -> tuple[dict[str, Any], str]:
        """Steer a running task, answer a waiting one, or follow up a completed one (``record`` refreshed and checked
        by the caller); the new fields and what happened, in words."""
        task = self.find(record["id"], record.get("owner"))
        if task is not None and task.runner is not self:  # owned by another open runtime of this process
            return await task.runner.runtime.arun(task.runner.steer(record, message, call))
        status = record["status"]
        if task is not None and status in ACTIVE_STATUSES:
            self.runtime.inboxes.post(task.id, message)
            return {}, "queued: the task sees it before its next model call"
        if task is not None and status == "waiting_for_approval":
            task.session.resume = resume_for(message, record.get("approval_request") or [])
            task.set(status="pending", approval_request=None, announced=False)
            self._launch(task, task.call)
            return dict(task.fields), "answered: the task resumes"
        turns = int(record.get("turns") or 1) + 1
        if task is None:
            # The conversation lived in a process (or runtime) that has ended: rebuild it from the record.
            seed = [HumanMessage(content=record["description"]),
                    AIMessage(content=record.get("result") or "")]
            fields = await self.start(record["id"], dataclasses.replace(call, description=message),
                                      seed=seed, attempt=int(record.get("attempt") or 1), turns=turns,
                                      outcome_db=record.get("outcome_db"))
            return fields, "sent as a follow-up; the conversation was rebuilt from the record"
        task.new_run(turns=turns)
        self._launch(task, dataclasses.replace(task.call, description=message))
        return dict(task.fields), "sent as a follow-up in the same conversation"

    async def cancel(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Stop the task now; a model or tool call in flight is abandoned."""
        task = self.find(record["id"], record.get("owner"))
        if task is not None and task.runner is not self:
            return await task.runner.runtime.arun(task.runner.cancel(record))
        self.runtime.inboxes.take(record["id"])
        if task is None:
            return {"status": "cancelled", "finished_at": now(), "updated_at": now()}
        if task.job is not None and not task.job.done():
            task.job.cancel()
        task.session.interrupts = []
        self._finish(task, status="cancelled", finished_at=now(), approval_request=None)
        if self.on_end:  # told, not waited for: a cancel answers at once
            with contextlib.suppress(RuntimeClosed):
                self.runtime.spawn(tell_end(self.on_end, {**task.fields, "id": task.id, **_call_fields(task.call)}))
        return {**task.fields, **task.usage()}

    def _launch(self, task: LocalTask, call: TaskCall) -> None:
        self.runtime.table.revive(task.id)
        task.job = self.runtime.spawn(self._drive(task, call))
        if db := task.fields.get("outcome_db"):  # a lease other hosts can see, renewed while it lives
            self.runtime.lease_soon(str(db), task.id)

    async def _drive(self, task: LocalTask, call: TaskCall) -> None:
        try:
            # The place is held until the child's work has stopped, a thread included (boundary.running_in).
            async with self.limit.ahold() as slot:
                task.set(status="running", started_at=task.fields.get("started_at") or now())
                with running_in(slot):
                    await self._run(task, call)
        except asyncio.CancelledError:
            # The transcript the cancelled run ended with a mark, if it began (see LocalTask.heard).
            if not self.runtime.closed and task.fields.get("status") == "cancelled":  # by cancel()
                ended = {"transcript": task.cancelled_transcript} if task.cancelled_transcript else {}
                self._finish(task, status="cancelled", finished_at=task.fields.get("finished_at") or now(), **ended)
            else:  # closed, or its loop going down: nobody cancelled it, it is lost
                self._finish(task, **lost(CLOSED_REASON, task.cancelled_transcript), announced=False)
        except BaseException as exc:  # noqa: BLE001 - a task fails alone, never the loop
            # Not re-raised, exits included: out of run_forever they would stop the loop every task uses (a real
            # Ctrl-C reaches the main thread, never this one, so here it is the child's).
            await self._settle(task, status="error", error=_describe(exc), finished_at=now(), announced=False)

    async def _run(self, task: LocalTask, call: TaskCall) -> None:
        while True:
            # The task's own session stands in for the child graph: it continues the conversation.
            task.session.graph = self.registry.graph(call.subagent_type, parent_model=call.parent_model,
                                                     parent_tools=call.parent_tools)
            outcome = await self.runner.arun(dataclasses.replace(call, graph=task.session, emit=task.heard))
            record = outcome.record
            if record.get("withheld_keys"):  # what the copy rule kept from this run, named as a task's record does
                task.set(withheld_keys=record["withheld_keys"])
            if record.get("status") == "error":  # a failure is the outcome, even after a pause
                await self._settle(task, status="error", error=record.get("error"),
                                   stop_reason=record.get("stop_reason"), finished_at=now(), announced=False,
                                   transcript=record.get("transcript"))
                return
            if task.session.interrupts:
                # The transcript so far: what the person deciding reads, and what a cancel leaves.
                task.set(status="waiting_for_approval", approval_request=pending_interrupts(task.session.interrupts),
                         announced=False, transcript=record.get("transcript"), **task.usage())
                return
            leftover = self.runtime.inboxes.take(task.id)
            if not leftover:
                # A wrap-up's answer (partial) reaches the parent as a task's does: after the line naming the limit.
                await self._settle(task, status="completed", result=outcome.answer or "",
                                   stop_reason=record.get("stop_reason"), partial=bool(record.get("partial")),
                                   finished_at=now(), announced=False, transcript=record.get("transcript"))
                # Steering queued while the end listeners were told has no run left to read it: it starts one.
                late = self.runtime.inboxes.take(task.id)
                if late and task.fields.get("status") == "completed":
                    task.new_run()
                    self._launch(task, dataclasses.replace(call, description=_steering_text(late)))
                return
            # Steering that arrived after the last model call: deliver it now.
            call = dataclasses.replace(call, description=_steering_text(leftover))

    async def _settle(self, task: LocalTask, **fields: Any) -> None:
        """:meth:`_finish` the task once the listeners were told it ended (their feedback added)."""
        feedback = await tell_end(self.on_end, {**task.fields, **fields, "id": task.id, **_call_fields(task.call)})
        fields = with_feedback(fields, feedback)
        unread = self.runtime.inboxes.take(task.id) if fields.get("status") == "error" else []
        if unread:  # the parent was told they were queued: say they were never read
            note = " | ".join(unread)
            note = note if len(note) <= UNREAD_CHARS else note[:UNREAD_CHARS - 1] + "…"
            fields["error"] = f"{fields.get('error') or ''}\n\nNot delivered (the run failed first): {note}"
        outcomes = self._outcomes(task, fields)
        try:
            await self._store(outcomes[task.id]).save_soon(outcomes)
        except Exception:  # noqa: BLE001 - an unwritable store keeps the outcome in memory
            self.runtime.outcomes.memory.save(task.id, outcomes[task.id])
        self._settled(task, fields)

    def _finish(self, task: LocalTask, **fields: Any) -> None:
        """Settle a task: its outcome is stored (durably when it can) before anyone can see it settled."""
        outcomes = self._outcomes(task, fields)
        try:
            self._store(outcomes[task.id]).save_all(outcomes)
        except Exception:  # noqa: BLE001 - an unwritable store keeps the outcome in memory
            self.runtime.outcomes.memory.save(task.id, outcomes[task.id])
        self._settled(task, fields)

    @staticmethod
    def _outcomes(task: LocalTask, fields: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The task's outcome by its id and, in a file, by its start call too (see :func:`call_key`)."""
        fields.update(task.session.meter.settled_usage())  # its calls still running charged (unsettled_calls)
        outcome = {**task.fields, **fields, "updated_at": now()}
        if outcome.get("outcome_db") and (key := call_key_of(task.call)) is not None:
            return {task.id: outcome, key: {**outcome, "id": task.id}}
        return {task.id: outcome}

    def _settled(self, task: LocalTask, fields: dict[str, Any]) -> None:
        task.set(**fields)
        self.runtime.evict_later(self.runtime.table.settle(task.id, size=task.size(), at=time.time()))
        if not self.runtime.closed:
            for listener in self.on_settled:
                listener(task)

    def _store(self, record: Mapping[str, Any]) -> OutcomeStore:
        if path := record.get("outcome_db"):
            return self.runtime.outcomes.file(str(path))
        owner = Owner.parse(record.get("owner"))
        other = BackgroundRuntime.find(owner.runtime) if owner is not None else None
        return (other or self.runtime).outcomes.memory


def _never_taken(task: LocalTask, handed: Any) -> None:
    """A start the loop never took is stored ``lost`` (a process sharing the SQLite file would read it ``pending``)."""
    if handed.cancelled() or handed.exception() is not None:
        with contextlib.suppress(Exception):  # the failure path never raises
            task.abandon()


async def tell_end(listeners: Sequence[EndListener], record: Mapping[str, Any]) -> list[str]:
    """Tell each listener that the task of ``record`` ended; their feedback, in order. Never raises."""
    feedback: list[str] = []
    for listener in listeners:
        try:
            feedback += await listener(record)
        except Exception:  # noqa: BLE001 - a listener never changes how the task ended
            log.exception("a listener of background task %s failed", record.get("id"))
    return feedback


def with_feedback(fields: dict[str, Any], feedback: Sequence[str]) -> dict[str, Any]:
    """``fields`` with ``feedback`` appended to the result (completed) or the error (otherwise)."""
    if not feedback:
        return fields
    key = "result" if fields.get("status") == "completed" else "error"
    return {**fields, key: f"{fields.get(key) or ''}\n\nHook feedback: " + "\n".join(feedback)}


def _steering_text(messages: Sequence[str]) -> str:
    """Steering the child's last model call came too late for, as the message of a run of its own."""
    return "\n\n".join(STEERING_PREFIX + m for m in messages)


def _call_fields(call: TaskCall) -> dict[str, Any]:
    return {"agent_type": call.subagent_type, "description": call.description, "tool_call_id": call.tool_call_id}


def _describe(exc: BaseException) -> str:
    text = ""
    with contextlib.suppress(Exception):  # describing a failure never fails
        text = str(exc).strip()
    return f"{type(exc).__name__}: {text[:2000] or '(no message)'}"


def known_task(task_id: str) -> LocalTask | None:
    """The live entry for ``task_id`` in any open runtime of this process, if one runs it."""
    found = (runtime.table.get(task_id) for runtime in BackgroundRuntime.all_open())
    return cast("LocalTask | None", next((task for task in found if task is not None), None))
