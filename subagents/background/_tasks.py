"""The rules of background tasks over both runners, and :func:`wait_for_background` for a script that wants a
result first (an application carries on: finished tasks are announced before the parent's next model call)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import math
import threading
import time
import weakref
from collections.abc import Collection, Coroutine, Mapping, Sequence
from typing import Any, Literal

from subagents._boundary import is_forbidden_tool
from subagents._errors import (
    DelegationRefused,
    InvalidArgument,
    RuntimeClosed,
    RuntimeStalled,
    SpecError,
    TaskStateError,
    UnknownSubagent,
    safe_text,
)
from subagents._outcome import TaskCall, shows_something, task_id_for
from subagents._registry import SubagentRegistry
from subagents._runner import TASK_ID_METADATA_KEY
from subagents._settings import DelegationSettings
from subagents._spec import RemoteSubagentSpec
from subagents.background._ledger import (
    ACTIVE_STATUSES,
    LIVE_STATUSES,
    NOTEWORTHY_STATUSES,
    RETRYABLE_STATUSES,
    SETTLED_STATUSES,
    AsyncTaskRecord,
    changed_fields,
    checked_ledger,
    merge_async_records,
    now,
    usable_records,
)
from subagents.background._local import EndListener, LocalTaskRunner, known_task, tell_end, with_feedback
from subagents.background._remote import DEFAULT_REFRESH_BUDGET_S, RemoteTaskRunner, shared_client_pool
from subagents.background._runtime import BackgroundRuntime, Owner, checkpoint_db, checkpoint_db_now
from subagents.definitions._permissions import decided_message, is_approval

# :class:`BackgroundTasks` takes ledger records in and hands field updates out (the middleware writes them). Every
# operation first brings the record up to date; a wrong one raises :class:`TaskStateError` written for the model.
# A local task of another live process cannot be updated, cancelled or retried here (it would run twice).

_WAITED_KEPT = 10_000
"""Outcomes a wait keeps for ledgers that have not polled them yet (see :meth:`BackgroundTasks.keep_waited`)."""


class BackgroundTasks:
    """Start, refresh, steer, cancel and retry background tasks, local or remote.

    Args:
        registry: the local subagents (built with a steering inbox).
        remote: the subagents served by LangGraph Servers.
        max_concurrent: how many local tasks run at once; more wait as ``pending``.
        private_keys: more keys that never reach a local child.
        excluded_keys: keys the caller keeps to the parent (its ledgers).
        settings: the :class:`~subagents.DelegationSettings` for the local tasks' runner.
        remote_refresh_budget_s: bound on polling every remote task in one :meth:`refresh` (a parent turn).
        runtime: where the tasks live (default: a new one; close it with ``tasks.runtime.close()``).
    """

    def __init__(self, registry: SubagentRegistry, remote: Sequence[RemoteSubagentSpec] = (), *,
                 max_concurrent: int | None = None, private_keys: frozenset[str] = frozenset(),
                 excluded_keys: frozenset[str] = frozenset(), settings: DelegationSettings | None = None,
                 remote_refresh_budget_s: float = DEFAULT_REFRESH_BUDGET_S,
                 runtime: BackgroundRuntime | None = None) -> None:
        names = [*registry.names, *(s.name for s in remote)]  # a second spec of one name would replace the first
        if (twice := next((name for name in names if names.count(name) > 1), None)) is not None:
            raise SpecError(f"duplicate subagent name {twice!r}: each name must be unique")
        self.runtime = runtime if runtime is not None else BackgroundRuntime()
        self.local = LocalTaskRunner(registry, self.runtime, max_concurrent=max_concurrent,
                                     excluded_keys=excluded_keys, private_keys=private_keys, settings=settings)
        self.remote = RemoteTaskRunner(remote, refresh_budget_s=remote_refresh_budget_s)
        # The remote clients live on the runtime's loop and close with it.
        self.runtime.on_close.append(lambda: shared_client_pool().aclose())
        self.registry = registry
        self._ends_told: set[tuple[str, Any]] = set()  # remote (task id, attempt) whose end listeners heard
        _INSTANCES.add(self)
        self._waited: dict[str, tuple[Any, dict[str, Any]]] = {}
        """What a wait read of remote tasks it saw move on, by task id: (run id, fields), see :meth:`keep_waited`."""

    @property
    def on_end(self) -> list[EndListener]:
        """Who is told when a task ends (a remote task's end once, when this process first sees it)."""
        return self.local.on_end

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.registry.names, *self.remote.specs)

    async def start(self, call: TaskCall, ledger: Mapping[str, Any]) -> dict[str, Any]:
        """Launch ``call`` in the background and return its full new record."""
        record, fresh = self._new_record(call, ledger)
        if fresh:  # else the same tool call run again (a replayed step): nothing new
            record.update(await self._launch(record, call, attempt=1))
        return record

    def start_soon(self, call: TaskCall, ledger: Mapping[str, Any]) -> dict[str, Any] | None:
        """:meth:`start` from any thread but the loop's, without waiting for the loop; ``None`` when it must run on
        the loop (a remote task, an ``AsyncSqliteSaver`` not yet asked for its file, or a loop found blocked)."""
        record, fresh = self._new_record(call, ledger)
        if not fresh:
            return record
        if record["runner"] != "local" or self.runtime.stalled():
            return None
        try:
            outcome_db = checkpoint_db_now(call.parent_config)
        except LookupError:
            return None
        record.update(self.local.start_soon(record["id"], self._local_call(call), outcome_db=outcome_db))
        return record

    def _new_record(self, call: TaskCall, ledger: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        """The record a start begins with and ``True``, or the ledger's own (a replayed step) and ``False``."""
        if (call.parent_config.get("metadata") or {}).get(TASK_ID_METADATA_KEY):
            raise TaskStateError("subagents cannot delegate; do the work yourself")
        kind = self._kind(call.subagent_type)
        configurable = call.parent_config.get("configurable") or {}
        task_id = task_id_for(configurable.get("thread_id"), configurable.get("checkpoint_ns", ""), call.tool_call_id)
        if task_id in ledger:
            return dict(ledger[task_id]), False
        return AsyncTaskRecord(id=task_id, agent_type=call.subagent_type, runner=kind, status="pending",
                               description=call.description, tool_call_id=call.tool_call_id,
                               created_at=now()).model_dump(), True

    async def refresh(self, ledger: Mapping[str, Mapping[str, Any]], *, just_started: Collection[str] = ()
                      ) -> dict[str, dict[str, Any]]:
        """Field updates for every live task that moved on (an unreachable remote one gets a ``note``).
        ``just_started``: remote tasks the step before started, not polled while pending (barely begun)."""
        live = [r for r in ledger.values() if r.get("status") in LIVE_STATUSES and not (
            r["id"] in just_started and r.get("runner") == "remote" and r.get("status") == "pending")]
        waited = {r["id"]: fields for r in live if (fields := self._take_waited(r)) is not None}
        remote = [r for r in live if r.get("runner") == "remote" and r["id"] not in waited]
        polled = await self.remote.refresh_many(remote) if remote else {}
        updates = {}
        for record in live:
            if record["id"] in waited:
                fields = waited[record["id"]]
            elif record.get("runner") == "remote":
                fields, note = polled.get(record["id"], ({}, None))
                fields = {**await self.remote_end(record, fields), "note": note}
            else:
                fields = self.local.refresh(record)
            delta = changed_fields(dict(record), fields)
            delta.pop("updated_at", None)
            if delta:
                updates[record["id"]] = {**delta, "updated_at": now()}
        return updates

    async def check(self, record: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The record brought up to date, and any problem reaching its runner (also kept as ``note``)."""
        if record.get("runner") != "remote":
            return {**record, **self.local.refresh(record)}, None
        if record.get("status") not in LIVE_STATUSES:
            fields, problem = {}, None
        elif (waited := self._take_waited(record)) is not None:
            fields, problem = waited, None
        else:
            fields, problem = await self.remote.refresh(record)
        return {**record, **await self.remote_end(record, fields), "note": problem}, problem

    async def update(self, record: Mapping[str, Any], message: str, call: TaskCall,
                     decision: str | None = None, *, by_model: bool = False) -> tuple[dict[str, Any], str]:
        """Steer, answer or follow up; the updated record and what happened. ``decision`` answers a waiting task
        whatever the message says; ``by_model``: a model's call, which may refuse an approval but never grant one."""
        current, _ = await self.check(record)
        status = current["status"]
        if status in RETRYABLE_STATUSES:
            raise TaskStateError(f"task {current['id']} is {status}; it cannot take messages. "
                                 "Call retry_async_task to run it again.")
        if decision is not None and status != "waiting_for_approval":
            raise TaskStateError(f"task {current['id']} is {status}, not waiting_for_approval: "
                                 "leave decision out and send the message alone.")
        if by_model and status == "waiting_for_approval":
            message = message.strip()  # a model may refuse, never approve (nor answer with a JSON resume value)
            if decision == "approve" or (decision is None and (is_approval(message) or message[:1] in ("{", "["))):
                raise TaskStateError(
                    f"task {current['id']} waits for a person's approval, and a model cannot give it: the person "
                    "answers through the application. You may refuse it instead: decision=\"reject\" with the reason "
                    "as message.")
            message = decided_message(message, "reject")
        elif decision is not None:
            message = decided_message(message, decision)
        if not shows_something(message):  # nothing a child could act on, invisible characters included
            raise TaskStateError("message must not be empty")
        self._refuse_if_elsewhere(current, "steered")
        if current["runner"] == "remote":
            fields, what = await self.remote.steer(current, message)
        else:
            fields, what = await self.local.steer(current, message, self._local_call(call))
        return {**current, **fields, "updated_at": now()}, what

    async def cancel(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Cancel a live task; returns the updated record."""
        current, _ = await self.check(record)
        if current["status"] not in LIVE_STATUSES:
            raise TaskStateError(f"task {current['id']} is already {current['status']}; only pending, running or "
                                 "waiting_for_approval tasks can be cancelled.")
        self._refuse_if_elsewhere(current, "cancelled")
        if current["runner"] == "remote":
            fields = await self.remote.cancel(current)
            if self.on_end:  # told, not waited for: a cancel answers at once
                with contextlib.suppress(RuntimeClosed):
                    self.runtime.spawn(self.remote_end(current, fields))
        else:
            fields = await self.local.cancel(current)
        return {**current, **fields, "announced": True, "updated_at": now()}

    async def retry(self, record: Mapping[str, Any], call: TaskCall) -> dict[str, Any]:
        """Run a failed, cancelled or lost task again: a fresh attempt under the same id."""
        current, _ = await self.check(record)
        status = current["status"]
        self._refuse_if_elsewhere(current, "retried")
        if status not in RETRYABLE_STATUSES:
            advice = ("call update_async_task to follow it up" if status == "completed"
                      else "it has not stopped; check it later or cancel it first")
            raise TaskStateError(f"task {current['id']} is {status}; only error, cancelled or lost tasks can be "
                                 f"retried ({advice}).")
        kind = self._kind(current["agent_type"])
        if kind == "remote" and (late := await self.remote.landed_late(current)) is not None:
            return {**current, **late, "runner": kind, "updated_at": now()}  # its start landed after all
        again = dataclasses.replace(call, subagent_type=current["agent_type"],
                                    description=current["description"])
        fields = await self._launch(current, again, attempt=int(current.get("attempt") or 1) + 1)
        return {**current, **fields, "runner": kind, "updated_at": now()}

    async def remote_end(self, record: Mapping[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
        """``fields`` of a remote task, with the end listeners' feedback the first time they show it ended."""
        if record.get("status") not in LIVE_STATUSES or fields.get("status") not in SETTLED_STATUSES:
            return fields
        key = (str(record.get("id")), record.get("attempt"))
        if key in self._ends_told:
            return fields
        self._ends_told.add(key)
        if (budget := self.local.runner.budget) is not None:
            # The server's model calls are not metered here: what the run reports is charged once, as it ends.
            budget.charge(None, fields.get("input_tokens"), fields.get("output_tokens"))
        if not self.on_end:
            return fields
        return with_feedback(fields, await tell_end(self.on_end, {**record, **fields}))

    def _refuse_if_elsewhere(self, record: Mapping[str, Any], what: str) -> None:
        where = self.local.elsewhere(record) if record.get("runner") == "local" else None
        if where:
            raise TaskStateError(f"task {record['id']} is {record['status']} in {where}, which is still alive; it "
                                 f"cannot be {what} from here (it would run twice). Check it again later.")

    def _kind(self, agent_type: str) -> str:
        if agent_type in self.remote.specs:
            return "remote"
        if agent_type in self.registry:
            return "local"
        # deepagents' words, which a model (or a test) used to them looks for.
        valid = ", ".join(f"`{name}`" for name in self.names) or "none"
        raise UnknownSubagent(f"Unknown async subagent type `{safe_text(agent_type, 80)}`. Available types: {valid}")

    async def _launch(self, record: Mapping[str, Any], call: TaskCall, *, attempt: int) -> dict[str, Any]:
        if self._kind(call.subagent_type) == "remote":
            if (budget := self.local.runner.budget) is not None and (spent := budget.exhausted()):
                raise DelegationRefused(f"{spent}; no new delegations can start", stop_reason="budget")
            if budget is not None and budget.max_usd is not None:
                # One price per call: the server's model is not priced here, as an unpriced local model is not.
                raise DelegationRefused(f"{call.subagent_type!r} runs on a LangGraph Server, whose model calls "
                                        "have no price here: a budget's max_usd cannot bound them (max_tokens can)",
                                        stop_reason="budget")
            configurable = call.parent_config.get("configurable") or {}
            return await self.remote.start(record["id"], call.subagent_type, call.description, attempt=attempt,
                                           parent_thread_id=configurable.get("thread_id"),
                                           tool_call_id=record.get("tool_call_id"))
        local_call = dataclasses.replace(self._local_call(call), tool_call_id=record.get("tool_call_id"))
        return await self.local.start(record["id"], local_call, attempt=attempt,
                                      outcome_db=await checkpoint_db(call.parent_config))

    def keep_waited(self, before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]]) -> None:
        """Keep what a wait (no ledger to write) saw of tasks that ended or wait for approval, for their next
        :meth:`refresh` or :meth:`check`: read again, a run the wait ended at its deadline reads as ``cancelled``."""
        for task_id, old in before.items():
            new = after.get(task_id, old)
            if old.get("status") in LIVE_STATUSES and new.get("status") not in (old.get("status"), *ACTIVE_STATUSES):
                self._waited[task_id] = (old.get("run_id"), changed_fields(dict(old), dict(new)))
        while len(self._waited) > _WAITED_KEPT:  # waits whose ledger never came back: the oldest go
            self._waited.pop(next(iter(self._waited)))

    def _take_waited(self, record: Mapping[str, Any]) -> dict[str, Any] | None:
        """The fields a wait kept for this live record (its run, not a later one's), once."""
        kept = self._waited.get(record.get("id"))  # type: ignore[arg-type]
        if kept is None or record.get("status") not in LIVE_STATUSES or kept[0] != record.get("run_id"):
            return None
        del self._waited[record["id"]]
        return kept[1]

    @staticmethod
    def _local_call(call: TaskCall) -> TaskCall:
        """The call as a background child may see it: names and recursion limit, nothing of the finished step."""
        config = call.parent_config
        configurable = config.get("configurable") or {}
        kept: dict[str, Any] = {
            "configurable": {"thread_id": configurable.get("thread_id"),
                             "checkpoint_ns": configurable.get("checkpoint_ns", "")},
            "metadata": dict(config.get("metadata") or {}),
        }
        if config.get("recursion_limit"):
            kept["recursion_limit"] = config["recursion_limit"]
        # Tools no child may hold belong to the parent's middleware, which a task must not keep alive.
        tools = tuple(t for t in call.parent_tools if not is_forbidden_tool(t))
        return dataclasses.replace(call, parent_config=kept, emit=None, parent_tools=tools)


# Waiting for remote tasks: the batched poll every ``every_s``, and joins (:class:`_EndWatch`), on the runtime's
# loop. A join streams the whole run, dearer for the server than a batched search: on ``langgraph dev`` with 50
# tasks, 32 joins open settled them in 3.3 s against 1.9 s by polling.

async def settle_remote(tasks: BackgroundTasks, records: Mapping[str, Mapping[str, Any]], *,
                        deadline: float, every_s: float = 0.1) -> tuple[dict[str, dict[str, Any]], bool]:
    """Poll until no record of ``records`` is pending or running, or ``deadline`` (``time.monotonic``); the records
    as last seen and whether they settled in time. Never raises for a server's faults."""
    remote = {k: dict(v) for k, v in records.items()}
    watch = _EndWatch(tasks)
    try:
        while live := {k: r for k, r in remote.items() if r.get("status") in ACTIVE_STATUSES}:
            if (left := deadline - time.monotonic()) <= 0:
                return remote, False
            if due := watch.due(live):
                try:
                    async with asyncio.timeout(left):
                        updates = await tasks.refresh(due)
                except TimeoutError:
                    return remote, False
                remote = merge_async_records(remote, updates)
            if still := [r for r in remote.values() if r.get("status") in ACTIVE_STATUSES]:
                await watch.pause(still, max(0.0, min(every_s, deadline - time.monotonic())))
                for task_id, fields in watch.take():  # a join's answer is its task's read
                    if remote[task_id].get("status") in ACTIVE_STATUSES:
                        fields = await tasks.remote_end(remote[task_id], fields)
                        remote = merge_async_records(remote, {task_id: {**fields, "note": None, "updated_at": now()}})
        return remote, True
    finally:
        watch.close()
        tasks.keep_waited(records, remote)


JOIN_AT_MOST = 16
"""Where polls read answers in batches, join only while this few tasks are live (with many ending one
after another, each join brings a poll of them all)."""

JOINS_OPEN = 64
"""Joins open at once where each answer is read by its join (room is left in the pool for the rest)."""


class _EndWatch:
    """The pause between polls, cut short when a joined run ends: one join at a time where polls read in batches
    (a batch mostly ends together), every live task where joins read the answers (``reads_by_join``). Each task is
    joined once at most; the first join that fails leaves the rest of the wait to polls."""

    def __init__(self, tasks: BackgroundTasks) -> None:
        self.tasks = tasks
        self.jobs: dict[str, asyncio.Future[Any]] = {}
        self.joined: set[str] = set()
        self.broken = False

    def _read_by_join(self, record: Mapping[str, Any]) -> bool:
        return not self.broken and bool(record.get("run_id")) and self.tasks.remote.reads_by_join(record)

    def due(self, live: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
        """The live tasks a poll must read now: all but those a join reads (open, or to be opened)."""
        return {k: r for k, r in live.items()
                if not (self._read_by_join(r) and (k in self.jobs or k not in self.joined))}

    def take(self) -> list[tuple[str, dict[str, Any]]]:
        """The task ids and fields the joins that ended read (each once)."""
        read = []
        for task_id, job in list(self.jobs.items()):
            if not job.done():
                continue
            del self.jobs[task_id]
            if job.cancelled() or job.exception() is not None:
                self.broken = True
            elif job.result() is not None:
                read.append((task_id, job.result()))
        return read

    async def pause(self, live: Sequence[Mapping[str, Any]], seconds: float) -> None:
        unjoined = [r for r in live if r.get("runner") == "remote" and r.get("run_id") and r["id"] not in self.joined]
        for record in unjoined:
            if self._read_by_join(record):
                if len(self.jobs) >= JOINS_OPEN:
                    continue
            elif self.broken or self.jobs or len(live) > JOIN_AT_MOST:
                continue
            self.joined.add(record["id"])
            self.jobs[record["id"]] = asyncio.ensure_future(self.tasks.remote.join(record))
        if self.jobs:
            await asyncio.wait(self.jobs.values(), timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        else:
            await asyncio.sleep(seconds)

    def close(self) -> None:
        for job in self.jobs.values():
            if not job.done():
                job.cancel()
            elif not job.cancelled():
                job.exception()  # retrieved: a failed join is no news to report


# Every instance of this process, so a task is answered from its record alone (:func:`answer_approval`).
_INSTANCES: weakref.WeakSet[BackgroundTasks] = weakref.WeakSet()


def answer_approval(agent: Any, config: Any, task_id: str, decision: Literal["approve", "reject"],
                    reason: str = "") -> dict[str, Any]:
    """Answer a background task waiting for approval, as the person the application asked (the model cannot).
    ``agent``: the parent graph; ``config``: its thread. The task's updated record (the ledger catches up next turn);
    :class:`~subagents._errors.TaskStateError` for a task the thread does not hold, not waiting, or not run here.

    Example::

        waiting = [t for t, r in out["async_tasks"].items() if r["status"] == "waiting_for_approval"]
        answer_approval(agent, config, waiting[0], "approve")
    """
    runtime, answering = approval_answer(agent.get_state(config).values, task_id, decision, reason)
    return runtime.run(answering)[0]


async def aanswer_approval(agent: Any, config: Any, task_id: str, decision: Literal["approve", "reject"],
                           reason: str = "") -> dict[str, Any]:
    """:func:`answer_approval` from async code (and for a thread an async checkpointer keeps)."""
    runtime, answering = approval_answer((await agent.aget_state(config)).values, task_id, decision, reason)
    return (await runtime.arun(answering))[0]


def approval_answer(values: Mapping[str, Any], task_id: str, decision: str,
                    reason: str) -> tuple[BackgroundRuntime, Coroutine[Any, Any, tuple[dict[str, Any], str]]]:
    """The runtime to answer on, and the answer, for the task ``task_id`` of a thread's state ``values``."""
    ledger = values.get("async_tasks")
    record = usable_records(ledger).get(task_id) if isinstance(ledger, Mapping) else None
    if record is None:
        raise TaskStateError(f"answer_approval: no background task {task_id!r} in the thread's async_tasks")
    if record.get("runner") == "remote":
        found = [t for t in _INSTANCES if record.get("agent_type") in t.remote.specs]
    else:
        local = known_task(task_id)
        found = [t for t in _INSTANCES if local is not None and t.local is local.runner]
    if not found:
        raise TaskStateError(f"answer_approval: task {task_id!r} is {record.get('status')} and nothing in this "
                             "process runs it (a local task lives in the process that started it)")
    call = TaskCall(subagent_type=str(record.get("agent_type")), description="", parent_state={},
                    tool_call_id=None, parent_config={})
    return found[0].runtime, found[0].update(record, reason or decision, call, decision)


def wait_for_background(ledger: Mapping[str, Any], timeout_s: float = 30.0, *,
                        tasks: BackgroundTasks | None = None, every_s: float = 0.1) -> bool:
    """Block until the tasks of ``ledger`` (an ``async_tasks`` mapping) have settled; ``False`` on timeout (or a
    hung server). :class:`InvalidArgument` for live remote tasks and no ``tasks`` (the :class:`BackgroundTasks` that
    started them); :class:`StoredDataError` for a record it cannot wait for.

    Example::

        state = agent.invoke({"messages": [...]}, config)
        wait_for_background(state["async_tasks"], tasks=middleware.tasks)
    """
    if isinstance(every_s, bool) or not isinstance(every_s, (int, float)) or not every_s > 0:
        # 0, negative or NaN: back-to-back polls, a busy loop of requests
        raise InvalidArgument(f"wait_for_background: every_s must be a number of seconds > 0 (got {every_s!r})")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or math.isnan(timeout_s):
        raise InvalidArgument(f"wait_for_background: timeout_s must be a number of seconds (got {timeout_s!r})")
    deadline = time.monotonic() + timeout_s
    ledger = checked_ledger(ledger, "wait_for_background")
    remote = {k: v for k, v in ledger.items() if v.get("runner") == "remote"}
    local = {k: v for k, v in ledger.items() if k not in remote}
    if any(r.get("status") in ACTIVE_STATUSES for r in remote.values()) and tasks is None:
        raise InvalidArgument("wait_for_background: the ledger has remote tasks still running; pass tasks= "
                              "(the BackgroundTasks that started them, e.g. middleware.tasks) to wait for them")
    flushed: set[str] = set()
    for task_id, record in local.items():
        owner = Owner.parse(record.get("owner"))
        runtime = BackgroundRuntime.find(owner.runtime) if owner is not None else None
        if (runtime is not None and runtime.id not in flushed and not runtime.in_loop()
                and record.get("status") in ACTIVE_STATUSES and runtime.table.get(task_id) is None):
            # A start handed over by start_soon is in the table after one round trip of the loop (only then: a wait
            # for tasks the table shows settled answers at once, even with no time left).
            flushed.add(runtime.id)
            try:
                runtime.run(asyncio.sleep(0), timeout=max(deadline - time.monotonic(), 0.0))
            except RuntimeClosed:
                continue
            except (concurrent.futures.TimeoutError, RuntimeStalled):
                return False
        while runtime is not None and not runtime.closed:
            task = runtime.table.get(task_id)
            if task is None or task.fields.get("status") in NOTEWORTHY_STATUSES:  # settled, or waits for approval
                break
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
    if tasks is None or not any(r.get("status") in ACTIVE_STATUSES for r in remote.values()):
        return True
    margin = max(deadline - time.monotonic(), 0.0) + 1.0
    try:  # bounded on the loop by the deadline itself; the margin is for a loop that is stuck
        _, settled = tasks.runtime.run(settle_remote(tasks, remote, deadline=deadline, every_s=every_s),
                                       timeout=margin if margin < threading.TIMEOUT_MAX else None)
    except (concurrent.futures.TimeoutError, RuntimeClosed):  # a loop that stalls or stops: not settled
        return False
    return settled
