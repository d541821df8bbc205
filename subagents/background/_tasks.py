"""The rules of background tasks, over both runners: what each operation may do, and when.

:class:`BackgroundTasks` takes ledger records in and hands field updates
out; it never touches graph state itself (the middleware writes what it
returns into ``async_tasks``). Every operation first brings the record up to
date, so it acts on how the task stands now, not on how it stood at the
last check. Wrong operations raise :class:`TaskStateError` with a message
written for the model: what is wrong and what to do instead.

=========================  ==========================================================
operation                  allowed when the task is
=========================  ==========================================================
``update`` (steer)         ``pending``/``running``: the child sees it before its next
                           model call (local) or its run restarts with it (remote)
``update`` (answer)        ``waiting_for_approval``: resumes the child with a decision
``update`` (follow up)     ``completed``: continues the same child conversation
``cancel``                 ``pending``, ``running``, ``waiting_for_approval``
``retry``                  ``error``, ``cancelled``, ``lost``: a fresh attempt, same id
=========================  ==========================================================

A local task whose owner is another live process is left as it stands:
steering, cancelling or retrying it from here is refused, since it would
run twice.

All methods are coroutines for the runtime's loop.

Example::

    runtime = BackgroundRuntime()
    tasks = BackgroundTasks(registry, [remote_spec], max_concurrent=4, runtime=runtime)
    record = runtime.run(tasks.start(call, ledger={}))
    updates = runtime.run(tasks.refresh({record["id"]: record}))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from subagents._one_level import is_forbidden_tool
from subagents._outcome import TaskCall, task_id_for
from subagents._registry import SubagentRegistry
from subagents._runner import TASK_ID_METADATA_KEY
from subagents.background._approval import decided_message
from subagents.background._ledger import (
    ACTIVE_STATUSES,
    RETRYABLE_STATUSES,
    AsyncTaskRecord,
    changed_fields,
    now,
)
from subagents.background._local import LocalTaskRunner
from subagents.background._outcomes import checkpoint_db
from subagents.background._remote import DEFAULT_REFRESH_BUDGET_S, RemoteSubagentSpec, RemoteTaskRunner
from subagents.background._runtime import BackgroundRuntime
from subagents.settings import DelegationSettings

_LIVE = ACTIVE_STATUSES | {"waiting_for_approval"}



REMOTE_SETTLE_S = 0.5
"""How long a just-written remote record waits before the per-turn poll reads it again."""


class TaskStateError(ValueError):
    """An operation that does not apply to the task as it stands; the message says why."""


class BackgroundTasks:
    """Start, refresh, steer, cancel and retry background tasks, local or remote.

    Args:
        registry: the local subagents (built with a steering inbox).
        remote: the subagents served by LangGraph Servers.
        max_concurrent: how many local tasks run at once; more wait as ``pending``.
        private_keys: more keys that never reach a local child.
        excluded_keys: keys the caller keeps to the parent (its ledgers).
        settings: the :class:`~subagents.settings.DelegationSettings` for the
            local tasks' :class:`~subagents.TaskRunner`.
        remote_refresh_budget_s: bound on polling every remote task in one
            :meth:`refresh` (a parent turn); see :class:`~subagents.background._remote.RemoteTaskRunner`.
        runtime: where the tasks live (default: a new one; close it with ``tasks.runtime.close()``).
    """

    def __init__(
        self,
        registry: SubagentRegistry,
        remote: Sequence[RemoteSubagentSpec] = (),
        *,
        max_concurrent: int | None = None,
        private_keys: frozenset[str] = frozenset(),
        excluded_keys: frozenset[str] = frozenset(),
        settings: DelegationSettings | None = None,
        remote_refresh_budget_s: float = DEFAULT_REFRESH_BUDGET_S,
        runtime: BackgroundRuntime | None = None,
    ) -> None:
        clash = set(registry.names) & {s.name for s in remote}
        if clash:
            raise ValueError(f"duplicate subagent name(s) {sorted(clash)}: each name must be unique")
        self.runtime = runtime if runtime is not None else BackgroundRuntime()
        self.local = LocalTaskRunner(registry, self.runtime, max_concurrent=max_concurrent,
                                     excluded_keys=excluded_keys, private_keys=private_keys, settings=settings)
        self.remote = RemoteTaskRunner(remote, refresh_budget_s=remote_refresh_budget_s)
        # The remote clients live on the runtime's loop and close with it.
        self.runtime.on_close.append(_close_remote_clients)
        self.registry = registry

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.registry.names, *self.remote.specs)

    # -- operations --------------------------------------------------------

    async def start(self, call: TaskCall, ledger: Mapping[str, Any]) -> dict[str, Any]:
        """Launch ``call`` in the background and return its full new record."""
        if (call.parent_config.get("metadata") or {}).get(TASK_ID_METADATA_KEY):
            raise TaskStateError("subagents cannot delegate; do the work yourself")
        kind = self._kind(call.subagent_type)
        configurable = call.parent_config.get("configurable") or {}
        task_id = task_id_for(
            configurable.get("thread_id"), configurable.get("checkpoint_ns", ""), call.tool_call_id
        )
        if task_id in ledger:  # the same tool call run again (a replayed step): nothing new
            return dict(ledger[task_id])
        record = AsyncTaskRecord(
            id=task_id,
            agent_type=call.subagent_type,
            runner=kind,
            status="pending",
            description=call.description,
            tool_call_id=call.tool_call_id,
            created_at=now(),
        ).model_dump()
        record.update(await self._launch(record, call, attempt=1))
        return record

    async def refresh(self, ledger: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        """Field updates for every live task whose state moved on since the ledger saw it.

        Remote tasks are polled in one batch per server, within the runner's
        budget; one whose server cannot be reached keeps its status and gets
        a ``note`` saying so (cleared once the server answers again). A
        pending remote record written less than :data:`REMOTE_SETTLE_S` ago
        (a task started in this very turn) is not polled yet: its run has
        barely begun, and 50 starts followed at once by a poll of all 50 made
        the turn slower than the work. A running one just polled (a poll moved
        it from pending) is polled again next turn, as every live task is.
        """
        live = [r for r in ledger.values() if r.get("status") in _LIVE]
        recent = now() - REMOTE_SETTLE_S
        live = [r for r in live if r.get("runner") != "remote" or r.get("status") != "pending"
                or (r.get("updated_at") or 0) <= recent]
        remote = [r for r in live if r.get("runner") == "remote"]
        polled = await self.remote.refresh_many(remote) if remote else {}
        updates = {}
        for record in live:
            if record.get("runner") == "remote":
                fields, note = polled.get(record["id"], ({}, None))
                fields = {**fields, "note": note}
            else:
                fields = self.local.refresh(record)
            delta = changed_fields(dict(record), fields)
            delta.pop("updated_at", None)
            if delta:
                updates[record["id"]] = {**delta, "updated_at": now()}
        return updates

    async def check(self, record: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The record brought up to date, and any problem reaching its runner (also kept as ``note``)."""
        fields, problem = await self._fresh(record)
        current = {**record, **fields}
        if current.get("runner") == "remote":
            current["note"] = problem
        return current, problem

    async def update(self, record: Mapping[str, Any], message: str, call: TaskCall,
                     decision: str | None = None) -> tuple[dict[str, Any], str]:
        """Steer, answer or follow up; returns the updated record and what happened.

        ``decision`` (``"approve"``/``"reject"``) answers a task waiting for
        approval without relying on the message's words.
        """
        current, _ = await self.check(record)
        status = current["status"]
        if status in RETRYABLE_STATUSES:
            raise TaskStateError(
                f"task {current['id']} is {status}; it cannot take messages. "
                "Call retry_async_task to run it again."
            )
        if decision is not None:
            if status != "waiting_for_approval":
                raise TaskStateError(f"task {current['id']} is {status}, not waiting_for_approval: "
                                     "leave decision out and send the message alone.")
            message = decided_message(message, decision)
        if not message.strip():
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
        if current["status"] not in _LIVE:
            raise TaskStateError(
                f"task {current['id']} is already {current['status']}; only pending, running or "
                "waiting_for_approval tasks can be cancelled."
            )
        self._refuse_if_elsewhere(current, "cancelled")
        if current["runner"] == "remote":
            fields = await self.remote.cancel(current)
        else:
            fields = await self.local.cancel(current)
        return {**current, **fields, "announced": True, "updated_at": now()}

    async def retry(self, record: Mapping[str, Any], call: TaskCall) -> dict[str, Any]:
        """Run a failed, cancelled or lost task again: a fresh attempt under the same id."""
        current, _ = await self.check(record)
        status = current["status"]
        self._refuse_if_elsewhere(current, "retried")
        if status not in RETRYABLE_STATUSES:
            advice = (
                "call update_async_task to follow it up" if status == "completed"
                else "it has not stopped; check it later or cancel it first"
            )
            raise TaskStateError(
                f"task {current['id']} is {status}; only error, cancelled or lost tasks can be "
                f"retried ({advice})."
            )
        kind = self._kind(current["agent_type"])
        again = dataclasses.replace(call, subagent_type=current["agent_type"],
                                    description=current["description"])
        fields = await self._launch(current, again, attempt=int(current.get("attempt") or 1) + 1)
        return {**current, **fields, "runner": kind, "updated_at": now()}

    # -- helpers -----------------------------------------------------------

    def _refuse_if_elsewhere(self, record: Mapping[str, Any], what: str) -> None:
        where = self.local.elsewhere(record) if record.get("runner") == "local" else None
        if where:
            raise TaskStateError(
                f"task {record['id']} is {record['status']} in {where}, which is still alive; it cannot "
                f"be {what} from here (it would run twice). Check it again later."
            )

    def _kind(self, agent_type: str) -> str:
        if agent_type in self.remote.specs:
            return "remote"
        if agent_type in self.registry:
            return "local"
        valid = ", ".join(self.names) or "none"
        raise TaskStateError(f"unknown subagent_type {agent_type!r}; valid types are: {valid}")

    async def _launch(self, record: Mapping[str, Any], call: TaskCall, *, attempt: int) -> dict[str, Any]:
        if self._kind(call.subagent_type) == "remote":
            configurable = call.parent_config.get("configurable") or {}
            return await self.remote.start(
                record["id"], call.subagent_type, call.description,
                parent_thread_id=configurable.get("thread_id"),
                tool_call_id=record.get("tool_call_id"), attempt=attempt,
            )
        local_call = dataclasses.replace(self._local_call(call), tool_call_id=record.get("tool_call_id"))
        return await self.local.start(record["id"], local_call, attempt=attempt,
                                      outcome_db=await checkpoint_db(call.parent_config))

    async def _fresh(self, record: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
        if record.get("runner") == "remote":
            if record.get("status") not in _LIVE:
                return {}, None
            return await self.remote.refresh(record)
        return self.local.refresh(record), None

    @staticmethod
    def _local_call(call: TaskCall) -> TaskCall:
        """The call as a background child may see it: no trace of the parent's finished step.

        The parent's checkpointer and callbacks belong to a step that ends
        when the tool returns; only the names (thread, namespace, metadata)
        and the recursion limit are kept.
        """
        config = call.parent_config
        configurable = config.get("configurable") or {}
        kept: dict[str, Any] = {
            "configurable": {
                "thread_id": configurable.get("thread_id"),
                "checkpoint_ns": configurable.get("checkpoint_ns", ""),
            },
            "metadata": dict(config.get("metadata") or {}),
        }
        if config.get("recursion_limit"):
            kept["recursion_limit"] = config["recursion_limit"]
        # The stream writer belongs to that finished step too. Tools no child may hold are
        # dropped now: they belong to the parent's middleware, which a task must not keep alive.
        tools = tuple(t for t in call.parent_tools if not is_forbidden_tool(t))
        return dataclasses.replace(call, parent_config=kept, emit=None, parent_tools=tools)


async def _close_remote_clients() -> None:
    from subagents.background._remote_clients import shared_client_pool

    await shared_client_pool().aclose()
