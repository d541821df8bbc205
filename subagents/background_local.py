"""The local background runner: subagents running in this process, outliving the parent's turn.

A background task is the same delegation as a ``task`` call -- the same
built subagent, isolation, one-level rule, limits and fault handling, because
each run of it goes through :meth:`subagents.TaskRunner.arun` -- started on
the process's :mod:`background loop <subagents.background_loop>` instead of
inside the parent's step, so the tool returns at once.

What makes it a *task* rather than a call:

* **Its own conversation.** The child runs on its own thread of its own
  in-memory checkpointer (a :class:`ChildSession`), not as a subgraph of the
  parent, whose step has already ended. Follow-ups and approvals continue
  that thread.
* **A process-level table.** :data:`BOOT_ID` names this process; the table
  maps task ids to :class:`LocalTask` entries, so any later parent turn in
  this process (even through a new graph object) finds its tasks. A ledger
  record still ``pending``/``running``/``waiting_for_approval`` whose owner is
  another boot id, or that this process does not know, is ``lost``: the
  process that ran it is gone, and so is the task.
* **A concurrency cap.** Tasks beyond ``max_concurrent`` stay ``pending``
  until a slot frees up.

Every method runs on the background loop (the coroutines are awaited there,
the plain methods are called from coroutines there); the loop is the only
writer of the table, so it needs no locks.

Example (inside a coroutine on the background loop)::

    runner = LocalTaskRunner(registry, max_concurrent=4)
    fields = await runner.start(task_id, call)      # returns at once: {'status': 'pending', ...}
    later = runner.refresh({**record, **fields})     # {'status': 'completed', 'result': ...}
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import uuid
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.pregel import Pregel
from langgraph.types import Command

from subagents.background_approval import pending_interrupts, resume_for
from subagents.background_inbox import INBOX_METADATA_KEY, STEERING_PREFIX, post, take
from subagents.background_ledger import ACTIVE_STATUSES, SETTLED_STATUSES, now
from subagents.limiter import ConcurrencyLimit
from subagents.meter import TaskMeter
from subagents.registry import SubagentRegistry
from subagents.outcome import TaskCall
from subagents.runner import TaskRunner

BOOT_ID = uuid.uuid4().hex
"""This process's identity, stored as ``owner`` in the records of its local tasks."""

LOST_REASON = (
    "the process running this task ended before it finished (for example a restart); "
    "call retry_async_task to run it again"
)


class ChildSession:
    """One background child's conversation: a thread of its own checkpointer.

    It stands in for the child graph that :class:`~subagents.TaskRunner`
    invokes and decides what each invocation continues: the first run gets
    the isolated input; later runs (continuation requests, follow-ups,
    leftover steering) get only their new messages, appended to the thread;
    an approval resumes the paused run with ``Command(resume=...)``.
    """

    def __init__(self, task_id: str, meter: TaskMeter, seed: list[Any] | None = None) -> None:
        self.task_id = task_id
        self.meter = meter
        self.thread_id = f"background-{task_id}-{uuid.uuid4().hex[:8]}"
        self.graph: Any = None
        self.resume: Any = None
        self.interrupts: list[Any] = []
        self._seed = seed or []
        self._saver = InMemorySaver()
        self._bound: tuple[Any, Any] | None = None
        self._last: Mapping[str, Any] | None = None

    def _graph(self) -> Any:
        """The child graph bound to this session's checkpointer (a LangGraph graph), else as given."""
        if self._bound is None or self._bound[0] is not self.graph:
            bound = self.graph
            if isinstance(bound, Pregel):
                bound = bound.copy(update={"checkpointer": self._saver})
            self._bound = (self.graph, bound)
        return self._bound[1]

    async def ainvoke(self, inputs: Mapping[str, Any], config: Mapping[str, Any]) -> Any:
        if self.interrupts and self.resume is None and self._last is not None:
            # Paused for approval: nothing runs until the parent answers.
            return self._last
        metadata = {**(config.get("metadata") or {}), INBOX_METADATA_KEY: self.task_id}
        run_config = {
            **config,
            "metadata": metadata,
            "callbacks": [*(config.get("callbacks") or []), self.meter],
            "configurable": {"thread_id": self.thread_id},
        }
        payload: Any
        if self.resume is not None:
            payload, self.resume = Command(resume=self.resume), None
        elif self._last is None and self._seed:
            payload = {**inputs, "messages": [*self._seed, *inputs["messages"]]}
        elif self._last is None:
            payload = dict(inputs)
        elif isinstance(self.graph, Pregel):
            payload = {"messages": list(inputs["messages"])}
        else:
            # A runnable with no checkpointer of ours: the session carries the history.
            payload = {"messages": [*self._last.get("messages", []), *inputs["messages"]]}
        result = await self._graph().ainvoke(payload, run_config)
        self.interrupts = list(result.get("__interrupt__") or []) if isinstance(result, Mapping) else []
        self._last = result
        return result

    def invoke(self, inputs: Mapping[str, Any], config: Mapping[str, Any]) -> Any:
        raise RuntimeError("background children run on the background loop, with ainvoke")


_session: contextvars.ContextVar[ChildSession] = contextvars.ContextVar("background_child_session")
"""The session of the task whose run is being prepared (each task's driver runs in its own context)."""


class _SessionRegistry:
    """The registry as the shared runner sees it: the real specs, and as graph the current task's session."""

    def __init__(self, registry: SubagentRegistry) -> None:
        self._registry = registry

    def spec(self, name: str) -> Any:
        return self._registry.spec(name)

    def graph(self, name: str, *, parent_model: Any, parent_tools: Any) -> Any:
        session = _session.get()
        session.graph = self._registry.graph(name, parent_model=parent_model, parent_tools=parent_tools)
        return session


@dataclasses.dataclass
class LocalTask:
    """A background task known to this process."""

    id: str
    call: TaskCall
    session: ChildSession
    fields: dict[str, Any]
    job: asyncio.Task[None] | None = None

    def set(self, **fields: Any) -> None:
        self.fields.update(fields, updated_at=now())

    def usage(self) -> dict[str, int]:
        meter = self.session.meter
        return {
            "model_calls": meter.model_calls,
            "input_tokens": meter.input_tokens,
            "output_tokens": meter.output_tokens,
        }


MAX_SETTLED_TASKS = 256
"""Finished tasks kept in the table; older ones are dropped (a follow-up rebuilds from the record)."""

_table: dict[str, LocalTask] = {}


def _forget_oldest_settled() -> None:
    """Bound the table's memory: drop the oldest finished tasks beyond the limit.

    Only tasks that can never change again are dropped: a dropped completed
    task is still followed up (its conversation is rebuilt from the record),
    while a waiting or running one would turn ``lost``.
    """
    settled = [t for t in _table.values()
               if t.fields.get("status") in SETTLED_STATUSES and (t.job is None or t.job.done())]
    excess = len(settled) - MAX_SETTLED_TASKS
    if excess > 0:
        for task in sorted(settled, key=lambda t: t.fields.get("updated_at") or 0)[:excess]:
            del _table[task.id]


def known_task(task_id: str) -> LocalTask | None:
    """The entry for ``task_id`` in this process's table, if this process ran it."""
    return _table.get(task_id)


class LocalTaskRunner:
    """Starts, steers, follows up, cancels and retries background tasks in this process.

    Args:
        registry: the subagents, as built for background use (their graphs
            carry :class:`~subagents.background_inbox.SteeringInbox`).
        max_concurrent: how many of this runner's tasks run at once.
        private_keys: more keys that never reach a child.
        runner_options: more keyword arguments for the
            :class:`~subagents.TaskRunner` (``sessions_dir``, ``prices``,
            ``budget``, ``short_answer_threshold``), so background children
            keep the transcripts and budgets of ``task`` calls.
    """

    def __init__(
        self,
        registry: SubagentRegistry,
        *,
        max_concurrent: int | None = None,
        private_keys: frozenset[str] = frozenset(),
        runner_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.registry = registry
        self.limit = ConcurrencyLimit(max_concurrent)
        # One runner for all tasks, as for `task` calls; the cap is ours (pending vs running).
        self.runner = TaskRunner(_SessionRegistry(registry),  # type: ignore[arg-type]
                                 private_keys=private_keys, **dict(runner_options or {}))

    # -- operations (each runs on the background loop) -----------------

    async def start(self, task_id: str, call: TaskCall, *, seed: list[Any] | None = None,
                    attempt: int = 1, turns: int = 1) -> dict[str, Any]:
        """Launch a fresh conversation for ``call``; return the record's new fields.

        ``seed`` messages come before the task's message (a conversation
        rebuilt from a record); ``attempt`` and ``turns`` carry over counts.
        """
        take(task_id)
        session = ChildSession(task_id, TaskMeter(), seed)
        task = LocalTask(task_id, call, session, {})
        task.set(status="pending", owner=BOOT_ID, thread_id=session.thread_id, attempt=attempt,
                 turns=turns, result=None, error=None, approval_request=None, started_at=None,
                 finished_at=None, announced=False, **task.usage())
        _table[task_id] = task
        _forget_oldest_settled()
        self._launch(task, call)
        return dict(task.fields)

    def refresh(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """The record's current fields as this process knows them (``lost`` if it cannot)."""
        task = _table.get(record["id"])
        if task is not None:
            return {**task.fields, **task.usage()}
        if record.get("status") in ACTIVE_STATUSES | {"waiting_for_approval"}:
            return {"status": "lost", "error": LOST_REASON, "finished_at": now(), "updated_at": now()}
        return {}

    async def steer(self, record: Mapping[str, Any], message: str, call: TaskCall) -> tuple[dict[str, Any], str]:
        """Steer a running task, answer a waiting one, or follow up a completed one.

        Returns the record's new fields and what happened, in words. The
        caller has refreshed ``record`` and checked that it is in one of
        those three states; ``call`` is this turn's call, used only to
        rebuild a conversation this process never had.
        """
        task = _table.get(record["id"])
        status = record["status"]
        if task is not None and status in ACTIVE_STATUSES:
            post(task.id, message)
            return {}, "queued: the task sees it before its next model call"
        if task is not None and status == "waiting_for_approval":
            task.session.resume = resume_for(message, record.get("approval_request") or [])
            task.set(status="pending", approval_request=None, announced=False)
            self._launch(task, task.call)
            return dict(task.fields), "answered: the task resumes"
        turns = int(record.get("turns") or 1) + 1
        if task is None:
            # The conversation lived in a process that has ended: rebuild it from the record.
            seed = [HumanMessage(content=record["description"]),
                    AIMessage(content=record.get("result") or "")]
            fields = await self.start(record["id"], dataclasses.replace(call, description=message),
                                      seed=seed, attempt=int(record.get("attempt") or 1), turns=turns)
            return fields, "sent as a follow-up; the conversation was rebuilt from the record"
        task.set(status="pending", result=None, error=None, finished_at=None, announced=False,
                 turns=turns)
        self._launch(task, dataclasses.replace(task.call, description=message))
        return dict(task.fields), "sent as a follow-up in the same conversation"

    def cancel(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Stop the task now; a model or tool call in flight is abandoned."""
        task = _table.get(record["id"])
        take(record["id"])
        if task is None:
            return {"status": "cancelled", "finished_at": now(), "updated_at": now()}
        if task.job is not None and not task.job.done():
            task.job.cancel()
        task.session.interrupts = []
        task.set(status="cancelled", finished_at=now(), approval_request=None)
        return {**task.fields, **task.usage()}

    # -- the driver -------------------------------------------------------

    def _launch(self, task: LocalTask, call: TaskCall) -> None:
        task.job = asyncio.get_running_loop().create_task(
            self._drive(task, call), context=contextvars.Context()
        )

    async def _drive(self, task: LocalTask, call: TaskCall) -> None:
        try:
            async with self.limit.ahold():
                task.set(status="running", started_at=task.fields.get("started_at") or now())
                while True:
                    # The shared runner's registry hands this session out as the child graph.
                    _session.set(task.session)
                    record = (await self.runner.arun(call)).record
                    if task.session.interrupts:
                        task.set(status="waiting_for_approval",
                                 approval_request=pending_interrupts(task.session.interrupts),
                                 announced=False, **task.usage())
                        return
                    if record.get("status") == "error":
                        task.set(status="error", error=record.get("error"), finished_at=now(),
                                 announced=False, transcript=record.get("transcript"), **task.usage())
                        return
                    leftover = take(task.id)
                    if leftover:
                        # Steering that arrived after the last model call: deliver it now.
                        text = "\n\n".join(STEERING_PREFIX + m for m in leftover)
                        call = dataclasses.replace(call, description=text)
                        continue
                    task.set(status="completed", result=record.get("result") or "",
                             finished_at=now(), announced=False,
                             transcript=record.get("transcript"), **task.usage())
                    return
        except asyncio.CancelledError:
            task.set(status="cancelled", finished_at=task.fields.get("finished_at") or now(),
                     **task.usage())
        except Exception as exc:  # noqa: BLE001 - a task fails alone, never the loop
            task.set(status="error", error=f"{type(exc).__name__}: {exc}", finished_at=now(),
                     announced=False, **task.usage())


def wait_for_background(ledger: Mapping[str, Any], timeout_s: float = 30.0) -> bool:
    """Block until the tasks of ``ledger`` (an ``async_tasks`` mapping) that this process runs have settled.

    For scripts, demos and tests that want a background result before the
    next turn; an application simply carries on. Returns ``False`` on timeout.
    """
    import time

    deadline = time.monotonic() + timeout_s
    for task_id in ledger:
        while True:
            task = known_task(task_id)
            if task is None or task.fields.get("status") in SETTLED_STATUSES:
                break
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
    return True
