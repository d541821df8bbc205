"""The remote background runner: subagents as runs on a LangGraph Server (Agent Protocol).

When one machine is not enough, a background subagent can be a graph served
by a LangGraph Server; ``langgraph-sdk`` talks to it. Each task gets one
server thread (its metadata names the parent thread, the agent type, the
task and the tool call) and a run on it. Everything needed to find the task
again -- ``thread_id`` and ``run_id`` -- is in the ledger record, so a parent
process that restarts loses nothing: it keeps checking from the checkpoint.
How server states read as task statuses: :mod:`subagents.background._remote_states`.

**Starts are idempotent.** A task's thread id is derived from its task id
and attempt, and created with ``if_exists="do_nothing"``: a start that is
run again (a parent that died mid-step and resumed) finds the thread it
made before and adopts its run instead of starting a second one.

**A misbehaving server never stalls the parent.** Every request is bounded
(``timeout_s`` for status requests, ``start_timeout_s`` for the rest) and
goes through the server's circuit breaker (:mod:`subagents.background._remote_health`);
the per-turn refresh as a whole is bounded by ``refresh_budget_s``. A server
that cannot be reached leaves its tasks as they were, with a ``note``.

**Polling is batched.** One ``threads.search(ids=...)`` per server tells
which live tasks' threads are still busy; one more reads the values of those
that ended; only what that cannot settle (a failed run) is read one by one.

The child gets one user message (the task description) and nothing of the
parent's state. Steering a running task cancels the current run, answers any
tool calls it left open, and starts a new run on the same thread with the new
instruction; a finished task is followed up the same way.

Example::

    spec = RemoteSubagentSpec(name="researcher", description="Researches at scale.",
                              graph_id="researcher", url="http://127.0.0.1:2024")
    runner = RemoteTaskRunner([spec])
    fields = await runner.start("t1", "researcher", "Find X", parent_thread_id="p", tool_call_id="c")
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

from subagents._runner import TASK_ID_METADATA_KEY
from subagents.background._approval import resume_for
from subagents.background._ledger import now
from subagents.background._remote_clients import RemoteClientPool, shared_client_pool
from subagents.background._remote_health import ServerUnavailable
from subagents.background._remote_polling import poll
from subagents.background._remote_spec import RemoteConfigError, RemoteSubagentSpec
from subagents.background._remote_states import (
    answers_for_open_tool_calls,
    fields_from,
    is_not_found,
    run_id_of,
    run_status,
    status_code,
)

__all__ = ["RemoteStartError", "RemoteSubagentSpec", "RemoteTaskRunner", "task_thread_id"]

T = TypeVar("T")

DEFAULT_REFRESH_BUDGET_S = 3.0
"""Bound on refreshing every remote task before one parent model call."""

START_ID_METADATA_KEY = "subagent_start_id"
_THREAD_NAMESPACE = uuid.UUID("3f4c2b8e-6a51-4f0e-9d1c-7b2a5e8f0c13")


class RemoteStartError(RuntimeError):
    """A server refused to start a task; the message names the server's url."""

    def __init__(self, url: str, reason: str) -> None:
        self.url, self.reason = url, reason
        super().__init__(f"the server at {url} did not start the task: {reason}")


def task_thread_id(task_id: str, attempt: int) -> str:
    """The server thread id of one attempt of a task (stable, so a start can be repeated)."""
    return str(uuid.uuid5(_THREAD_NAMESPACE, f"{task_id}/{attempt}"))


class RemoteTaskRunner:
    """Starts, checks, steers, follows up and cancels tasks on LangGraph Servers.

    Args:
        specs: the remote subagents.
        pool: the clients and server health to use; default: the running
            loop's :func:`~subagents.background._remote_clients.shared_client_pool`.
        refresh_budget_s: bound on one :meth:`refresh_many` (a parent turn's poll).

    Every method is a coroutine to run on the background loop.
    """

    def __init__(self, specs: Sequence[RemoteSubagentSpec], *, pool: RemoteClientPool | None = None,
                 refresh_budget_s: float = DEFAULT_REFRESH_BUDGET_S) -> None:
        self.specs = {s.name: s for s in specs}
        self.refresh_budget_s = refresh_budget_s
        self.client_pool = pool
        """This runner's own pool; ``None``: the running loop's shared one."""

    @property
    def pool(self) -> RemoteClientPool:
        return self.client_pool if self.client_pool is not None else shared_client_pool()

    def client(self, spec: RemoteSubagentSpec) -> Any:
        """The shared SDK client for ``spec``'s server."""
        return self.pool.client(spec)

    async def request(self, spec: RemoteSubagentSpec, request: Awaitable[T], *, poll: bool = False) -> T:
        """Await one request to ``spec``'s server, bounded and through its circuit breaker."""
        timeout = spec.timeout_s if poll else spec.start_timeout_s
        return await self.pool.health.call(spec.url, request, timeout_s=timeout)

    # -- operations ------------------------------------------------------

    async def start(self, task_id: str, agent_type: str, description: str, *,
                    parent_thread_id: str | None, tool_call_id: str | None,
                    attempt: int = 1) -> dict[str, Any]:
        """Create (or find again) the task's thread and first run; return the record's new fields."""
        spec = self.specs[agent_type]
        about = {
            "parent_thread_id": parent_thread_id,
            "agent_type": agent_type,
            "tool_call_id": tool_call_id,
            TASK_ID_METADATA_KEY: task_id,
            "attempt": attempt,
        }
        try:
            thread_id, run = await self._start(spec, task_thread_id(task_id, attempt), about, description)
            run_id = run_id_of(run)
        except (ServerUnavailable, RemoteConfigError, RemoteStartError):
            raise
        except Exception as exc:  # noqa: BLE001 - named with the server below
            raise RemoteStartError(spec.url, _reason(exc)) from None
        return {
            "status": run_status(run.get("status")),
            "thread_id": thread_id,
            "run_id": run_id,
            "owner": None,
            "attempt": attempt,
            "turns": 1,
            "started_at": now(),
            "finished_at": None,
            "result": None,
            "error": None,
            "approval_request": None,
            "note": None,
            "announced": False,
        }

    async def _start(self, spec: RemoteSubagentSpec, thread_id: str, about: Mapping[str, Any],
                     description: str) -> tuple[str, Any]:
        client = self.client(spec)
        start_id = uuid.uuid4().hex
        metadata = {**spec.metadata, **about, START_ID_METADATA_KEY: start_id}
        thread = await self.request(spec, client.threads.create(
            thread_id=thread_id, metadata=metadata, if_exists="do_nothing"))
        made_here = (thread.get("metadata") or {}).get(START_ID_METADATA_KEY) == start_id
        if not made_here and (run := await self.latest_run(spec, thread_id)) is not None:
            return thread_id, run  # started before (a repeated step): adopt that run
        try:
            run = await self._run(spec, thread_id, about, strategy="reject",
                                  input={"messages": [{"role": "user", "content": description}]})
        except ServerUnavailable:
            raise
        except Exception as exc:
            if status_code(exc) == 409 and (run := await self.latest_run(spec, thread_id)) is not None:
                return thread_id, run  # a concurrent start of the same task won
            if made_here and (status_code(exc) or 0) in range(400, 500):
                await self._delete_quietly(spec, thread_id)  # leave no empty thread behind
            raise RemoteStartError(spec.url, _reason(exc)) from None
        return thread_id, run

    async def latest_run(self, spec: RemoteSubagentSpec, thread_id: str) -> Any:
        """The thread's most recent run, or ``None``."""
        runs = await self.request(spec, self.client(spec).runs.list(thread_id, limit=1), poll=True)
        return runs[0] if isinstance(runs, list) and runs else None

    async def _delete_quietly(self, spec: RemoteSubagentSpec, thread_id: str) -> None:
        try:
            await self.request(spec, self.client(spec).threads.delete(thread_id))
        except Exception:  # noqa: BLE001 - the start's own error is the one to report
            pass

    async def refresh(self, record: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The record's current fields from the server, and a note if it could not be read."""
        spec = self.specs.get(record["agent_type"])
        if spec is None:
            return {}, f"no remote subagent named {record['agent_type']!r} is configured here"
        try:
            return await self._read(spec, record), None
        except ServerUnavailable as exc:
            return {}, self.pool.health.note(spec.url) or str(exc)
        except Exception as exc:  # noqa: BLE001 - reported as a note, never raised into the parent
            return {}, f"the server at {spec.url} could not report this task: {_reason(exc)}"

    async def _read(self, spec: RemoteSubagentSpec, record: Mapping[str, Any]) -> dict[str, Any]:
        client = self.client(spec)
        try:
            run = await self.request(spec, client.runs.get(record["thread_id"], record["run_id"]), poll=True)
            thread = await self.request(spec, client.threads.get(record["thread_id"]), poll=True)
        except ServerUnavailable:
            raise
        except Exception as exc:
            if not is_not_found(exc):
                raise
            return {
                "status": "lost",
                "error": f"the server at {spec.url} no longer knows thread "
                f"{record['thread_id']} (was it reset?); call retry_async_task to run it again",
                "finished_at": now(),
            }
        return fields_from(run, thread)

    async def join(self, record: Mapping[str, Any]) -> None:
        """Return when the record's run ends on its server (a long-poll); raises on any fault.

        Not counted for the server's circuit: a wait uses it only to poll
        sooner, and polls on its own when it fails.
        """
        spec = self.specs[record["agent_type"]]
        # The join's own route, asked once: the SDK's runs.join reconnects, and warns, when it fails.
        thread_id, run_id = (quote(str(record[k]), safe="") for k in ("thread_id", "run_id"))
        await self.client(spec).http.get(f"/threads/{thread_id}/runs/{run_id}/join")

    async def refresh_many(self, records: Sequence[Mapping[str, Any]]
                           ) -> dict[str, tuple[dict[str, Any], str | None]]:
        """Refresh many tasks at once, within ``refresh_budget_s`` (see ``_remote_polling.poll``)."""
        return await poll(self, records)

    async def steer(self, record: Mapping[str, Any], message: str) -> tuple[dict[str, Any], str]:
        """Steer a running task, answer a waiting one, or follow up a finished one."""
        spec = self.specs[record["agent_type"]]
        client = self.client(spec)
        thread_id = record["thread_id"]
        status = record["status"]
        about = {TASK_ID_METADATA_KEY: record["id"], "agent_type": record["agent_type"]}
        if status == "waiting_for_approval":
            resume = resume_for(message, record.get("approval_request") or [])
            run = await self._run(spec, thread_id, about, command={"resume": resume})
            what = "answered: the task resumes"
        else:
            if status in ("pending", "running"):
                await self._cancel_quietly(spec, thread_id, record["run_id"])
                what = "the current run was stopped and restarted with the new instruction"
            else:
                what = "sent as a follow-up on the same thread"
            thread = await self.request(spec, client.threads.get(thread_id))
            messages = [*answers_for_open_tool_calls(thread), {"role": "user", "content": message}]
            run = await self._run(spec, thread_id, about, input={"messages": messages})
        turns = int(record.get("turns") or 1) + (0 if status == "waiting_for_approval" else 1)
        run_id = run_id_of(run)
        return {
            "status": run_status(run.get("status")),
            "run_id": run_id,
            "turns": turns,
            "result": None,
            "error": None,
            "approval_request": None,
            "finished_at": None,
            "note": None,
            "announced": False,
        }, what

    async def cancel(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Cancel the task's run on the server."""
        spec = self.specs[record["agent_type"]]
        await self._cancel_quietly(spec, record["thread_id"], record["run_id"])
        return {"status": "cancelled", "finished_at": now(), "approval_request": None, "note": None}

    async def _run(self, spec: RemoteSubagentSpec, thread_id: str, about: Mapping[str, Any], *,
                   strategy: str = "interrupt", **payload: Any) -> Any:
        return await self.request(spec, self.client(spec).runs.create(
            thread_id,
            spec.graph_id,
            metadata=dict(about),
            config=dict(spec.config) if spec.config else None,
            multitask_strategy=strategy,
            **payload,
        ))

    async def _cancel_quietly(self, spec: RemoteSubagentSpec, thread_id: str, run_id: str) -> None:
        """Cancel a run and wait for it to stop; a run that already ended is fine."""
        try:
            await self.request(spec, self.client(spec).runs.cancel(thread_id, run_id, wait=True))
        except ServerUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - an ended run cannot be cancelled, which is fine
            if not (is_not_found(exc) or status_code(exc) == 409):
                raise


def _reason(exc: BaseException) -> str:
    code = status_code(exc)
    text = " ".join(str(exc).split()) or "(no message)"
    text = text if len(text) <= 300 else text[:299] + "…"
    return f"HTTP {code}: {text}" if code else f"{type(exc).__name__}: {text}"
