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

All methods are coroutines for the :mod:`background loop <subagents.background_loop>`.

Example::

    tasks = BackgroundTasks(registry, [remote_spec], max_concurrent=4)
    record = background_loop().run(tasks.start(call, ledger={}))
    updates = background_loop().run(tasks.refresh({record["id"]: record}))
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from subagents.background_ledger import (
    ACTIVE_STATUSES,
    RETRYABLE_STATUSES,
    AsyncTaskRecord,
    changed_fields,
    now,
)
from subagents.background_local import LocalTaskRunner
from subagents.background_remote import RemoteSubagentSpec, RemoteTaskRunner
from subagents.outcome import TaskCall, task_id_for
from subagents.registry import SubagentRegistry
from subagents.runner import TASK_ID_METADATA_KEY

_LIVE = ACTIVE_STATUSES | {"waiting_for_approval"}


class TaskStateError(ValueError):
    """An operation that does not apply to the task as it stands; the message says why."""


class BackgroundTasks:
    """Start, refresh, steer, cancel and retry background tasks, local or remote.

    Args:
        registry: the local subagents (built with a steering inbox).
        remote: the subagents served by LangGraph Servers.
        max_concurrent: how many local tasks run at once; more wait as ``pending``.
        private_keys: more keys that never reach a local child.
        runner_options: more keyword arguments for the local tasks'
            :class:`~subagents.TaskRunner`.
    """

    def __init__(
        self,
        registry: SubagentRegistry,
        remote: Sequence[RemoteSubagentSpec] = (),
        *,
        max_concurrent: int | None = None,
        private_keys: frozenset[str] = frozenset(),
        runner_options: Mapping[str, Any] | None = None,
    ) -> None:
        clash = set(registry.names) & {s.name for s in remote}
        if clash:
            raise ValueError(f"duplicate subagent name(s) {sorted(clash)}: each name must be unique")
        self.local = LocalTaskRunner(registry, max_concurrent=max_concurrent, private_keys=private_keys,
                                     runner_options=runner_options)
        self.remote = RemoteTaskRunner(remote)
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
        """Field updates for every live task whose state moved on since the ledger saw it."""
        live = [r for r in ledger.values() if r.get("status") in _LIVE]
        fresh = await asyncio.gather(*(self._fresh(r) for r in live))
        updates = {}
        for record, (fields, _problem) in zip(live, fresh):
            delta = changed_fields(dict(record), fields)
            delta.pop("updated_at", None)
            if delta:
                updates[record["id"]] = {**delta, "updated_at": now()}
        return updates

    async def check(self, record: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The record brought up to date, and any problem reaching its runner."""
        fields, problem = await self._fresh(record)
        return {**record, **fields}, problem

    async def update(self, record: Mapping[str, Any], message: str, call: TaskCall) -> tuple[dict[str, Any], str]:
        """Steer, answer or follow up; returns the updated record and what happened."""
        current, _ = await self.check(record)
        status = current["status"]
        if status in RETRYABLE_STATUSES:
            raise TaskStateError(
                f"task {current['id']} is {status}; it cannot take messages. "
                "Call retry_async_task to run it again."
            )
        if not message.strip():
            raise TaskStateError("message must not be empty")
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
        if current["runner"] == "remote":
            fields = await self.remote.cancel(current)
        else:
            fields = self.local.cancel(current)
        return {**current, **fields, "announced": True, "updated_at": now()}

    async def retry(self, record: Mapping[str, Any], call: TaskCall) -> dict[str, Any]:
        """Run a failed, cancelled or lost task again: a fresh attempt under the same id."""
        current, _ = await self.check(record)
        status = current["status"]
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
        return await self.local.start(record["id"], local_call, attempt=attempt)

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
        # The stream writer belongs to that finished step too.
        return dataclasses.replace(call, parent_config=kept, emit=None)
