"""The remote background runner: subagents as runs on a LangGraph Server (Agent Protocol).

When one machine is not enough, a background subagent can be a graph served
by a LangGraph Server; ``langgraph-sdk`` talks to it. Each task gets one
server thread (its metadata names the parent thread, the agent type, the
task and the tool call) and a run on it. Everything needed to find the task
again -- ``thread_id`` and ``run_id`` -- is in the ledger record, so a parent
process that restarts loses nothing: it keeps checking from the checkpoint.

How server states map onto task statuses:

==========================================  ========================
run ``pending`` / ``running``               ``pending`` / ``running``
run ``success``, thread has interrupts      ``waiting_for_approval``
run ``success``                             ``completed`` (the last AI text)
run ``error``                               ``error`` (the server's message)
run ``timeout``                             ``error``
run ``interrupted`` (cancelled)             ``cancelled``
thread or run unknown to the server         ``lost``
==========================================  ========================

A run of an interrupting graph ends ``success`` while its *thread* is
``interrupted``, so the thread is read too. A cancelled run also leaves its
thread ``interrupted`` (without interrupts), which is why the run's status
decides first.

The child gets one user message (the task description) and nothing of the
parent's state: the remote graph has its own schema, and the parent's keys
are not sent over the network. Steering a running task cancels the current
run, answers any tool calls it left open, and starts a new run on the same
thread with the new instruction; a finished task is followed up the same way.

Example::

    spec = RemoteSubagentSpec(name="researcher", description="Researches at scale.",
                              graph_id="researcher", url="http://127.0.0.1:2024")
    runner = RemoteTaskRunner([spec])
    fields = await runner.start("t1", "researcher", "Find X", parent_thread_id="p", tool_call_id="c")
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from subagents.background_approval import pending_interrupts, resume_for
from subagents.background_ledger import now
from subagents.runner import TASK_ID_METADATA_KEY
from subagents.spec import NAME_PATTERN


class RemoteSubagentSpec(BaseModel):
    """A background subagent served by a LangGraph Server.

    ``graph_id`` is the graph (or assistant id) on the server at ``url``;
    ``headers`` go with every request (an API key, say); ``config`` is the
    run config sent with each run (``{"recursion_limit": 50}``, say).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    graph_id: str
    url: str
    headers: Mapping[str, str] = Field(default_factory=dict)
    config: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not NAME_PATTERN.match(value):
            raise ValueError(f"name must be a slug of letters, digits, '-' and '_' (got {value!r})")
        return value

    @field_validator("description", "graph_id", "url")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value


class RemoteTaskRunner:
    """Starts, checks, steers, follows up and cancels tasks on LangGraph Servers.

    Every method is a coroutine to run on the background loop, where the
    runner keeps one SDK client per server.
    """

    def __init__(self, specs: Sequence[RemoteSubagentSpec]) -> None:
        self.specs = {s.name: s for s in specs}
        self._clients: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}

    def _client(self, spec: RemoteSubagentSpec) -> Any:
        key = (spec.url, tuple(sorted(spec.headers.items())))
        client = self._clients.get(key)
        if client is None:
            from langgraph_sdk import get_client

            client = self._clients[key] = get_client(url=spec.url, headers=dict(spec.headers) or None)
        return client

    # -- operations ------------------------------------------------------

    async def start(self, task_id: str, agent_type: str, description: str, *,
                    parent_thread_id: str | None, tool_call_id: str | None,
                    attempt: int = 1) -> dict[str, Any]:
        """Create the task's thread and first run; return the record's new fields."""
        spec = self.specs[agent_type]
        client = self._client(spec)
        about = {
            "parent_thread_id": parent_thread_id,
            "agent_type": agent_type,
            "tool_call_id": tool_call_id,
            TASK_ID_METADATA_KEY: task_id,
            "attempt": attempt,
        }
        thread = await client.threads.create(metadata={**spec.metadata, **about})
        run = await self._run(spec, thread["thread_id"], about,
                              input={"messages": [{"role": "user", "content": description}]})
        return {
            "status": _run_status(run.get("status")),
            "thread_id": thread["thread_id"],
            "run_id": run["run_id"],
            "owner": None,
            "attempt": attempt,
            "turns": 1,
            "started_at": now(),
            "finished_at": None,
            "result": None,
            "error": None,
            "approval_request": None,
            "announced": False,
        }

    async def refresh(self, record: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The record's current fields from the server, and a problem reaching it, if any."""
        spec = self.specs.get(record["agent_type"])
        if spec is None:
            return {}, f"no remote subagent named {record['agent_type']!r} is configured here"
        client = self._client(spec)
        try:
            run = await client.runs.get(record["thread_id"], record["run_id"])
            thread = await client.threads.get(record["thread_id"])
        except Exception as exc:  # noqa: BLE001 - classified below
            if _is_not_found(exc):
                return {
                    "status": "lost",
                    "error": f"the server at {spec.url} no longer knows thread "
                    f"{record['thread_id']} (was it reset?); call retry_async_task to run it again",
                    "finished_at": now(),
                }, None
            return {}, f"could not reach the server at {spec.url}: {type(exc).__name__}: {exc}"
        return _fields_from(run, thread), None

    async def steer(self, record: Mapping[str, Any], message: str) -> tuple[dict[str, Any], str]:
        """Steer a running task, answer a waiting one, or follow up a finished one."""
        spec = self.specs[record["agent_type"]]
        client = self._client(spec)
        thread_id = record["thread_id"]
        status = record["status"]
        about = {TASK_ID_METADATA_KEY: record["id"], "agent_type": record["agent_type"]}
        if status == "waiting_for_approval":
            resume = resume_for(message, record.get("approval_request") or [])
            run = await self._run(spec, thread_id, about, command={"resume": resume})
            what = "answered: the task resumes"
        else:
            if status in ("pending", "running"):
                await _cancel_quietly(client, thread_id, record["run_id"])
                what = "the current run was stopped and restarted with the new instruction"
            else:
                what = "sent as a follow-up on the same thread"
            thread = await client.threads.get(thread_id)
            messages = [*_answers_for_open_tool_calls(thread), {"role": "user", "content": message}]
            run = await self._run(spec, thread_id, about, input={"messages": messages})
        turns = int(record.get("turns") or 1) + (0 if status == "waiting_for_approval" else 1)
        return {
            "status": _run_status(run.get("status")),
            "run_id": run["run_id"],
            "turns": turns,
            "result": None,
            "error": None,
            "approval_request": None,
            "finished_at": None,
            "announced": False,
        }, what

    async def cancel(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Cancel the task's run on the server."""
        spec = self.specs[record["agent_type"]]
        await _cancel_quietly(self._client(spec), record["thread_id"], record["run_id"])
        return {"status": "cancelled", "finished_at": now(), "approval_request": None}

    async def _run(self, spec: RemoteSubagentSpec, thread_id: str, about: Mapping[str, Any],
                   **payload: Any) -> Any:
        return await self._client(spec).runs.create(
            thread_id,
            spec.graph_id,
            metadata=dict(about),
            config=dict(spec.config) if spec.config else None,
            multitask_strategy="interrupt",
            **payload,
        )


def _run_status(status: str | None) -> str:
    return "running" if status == "running" else "pending"


def _fields_from(run: Mapping[str, Any], thread: Mapping[str, Any]) -> dict[str, Any]:
    values = thread.get("values") or {}
    fields: dict[str, Any] = {"run_id": run["run_id"], **_usage(values)}
    status = run.get("status")
    if status in ("pending", "running"):
        fields["status"] = status
        return fields
    interrupts = [i for items in (thread.get("interrupts") or {}).values() for i in items]
    if status == "success" and interrupts:
        fields.update(status="waiting_for_approval", approval_request=pending_interrupts(interrupts))
        return fields
    fields["finished_at"] = now()
    fields["approval_request"] = None
    if status == "success":
        fields.update(status="completed", result=_answer(values))
    elif status == "interrupted":
        fields["status"] = "cancelled"
    elif status == "timeout":
        fields.update(status="error", error="the run timed out on the server")
    else:
        problem = thread.get("error") or {}
        message = problem.get("message") if isinstance(problem, Mapping) else str(problem)
        kind = problem.get("error") if isinstance(problem, Mapping) else None
        text = f"{kind}: {message}" if kind and message else (message or f"the run ended {status!r}")
        fields.update(status="error", error=text)
    return fields


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b.get("text", "") if isinstance(b, Mapping) else str(b)
            for b in content
            if not isinstance(b, Mapping) or b.get("type") in (None, "text")
        )
    return ""


def _answer(values: Mapping[str, Any]) -> str:
    structured = values.get("structured_response")
    if structured is not None:
        return json.dumps(structured, default=str)
    for message in reversed(values.get("messages") or []):
        if isinstance(message, Mapping) and message.get("type") in ("ai", "AIMessageChunk"):
            text = _text(message.get("content")).strip()
            if text:
                return text
    return ""


def _usage(values: Mapping[str, Any]) -> dict[str, int]:
    calls = inp = out = 0
    for message in values.get("messages") or []:
        if isinstance(message, Mapping) and message.get("type") == "ai":
            calls += 1
            usage = message.get("usage_metadata") or {}
            inp += int(usage.get("input_tokens") or 0)
            out += int(usage.get("output_tokens") or 0)
    return {"model_calls": calls, "input_tokens": inp, "output_tokens": out}


def _answers_for_open_tool_calls(thread: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Tool results for calls a stopped run left unanswered (models reject open calls)."""
    messages = (thread.get("values") or {}).get("messages") or []
    answered = {m.get("tool_call_id") for m in messages if isinstance(m, Mapping) and m.get("type") == "tool"}
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("type") == "ai":
            return [
                {"role": "tool", "tool_call_id": call["id"], "name": call.get("name"),
                 "content": "Not run: the caller stopped this step to send a new instruction."}
                for call in message.get("tool_calls") or []
                if call.get("id") not in answered
            ]
    return []


async def _cancel_quietly(client: Any, thread_id: str, run_id: str) -> None:
    """Cancel a run and wait for it to stop; a run that already ended is fine."""
    try:
        await client.runs.cancel(thread_id, run_id, wait=True)
    except Exception as exc:  # noqa: BLE001 - an ended run cannot be cancelled, which is fine
        if not (_is_not_found(exc) or _status_code(exc) == 409):
            raise


def _status_code(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None) or getattr(exc, "status_code", None)


def _is_not_found(exc: BaseException) -> bool:
    return _status_code(exc) == 404
