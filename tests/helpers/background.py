"""Helpers for the background-task tests: polling, scripted parent turns, task ids."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deep_agent._testing import tool_call
from helpers import REPO, TESTS
from subagents._settings import DelegationSettings

NOTICE = "Background task updates"


class Backgrounds:
    """Makes ``BackgroundSubagentMiddleware`` instances for one test and closes them all after it."""

    def __init__(self) -> None:
        self.made: list[Any] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from middleware import BackgroundSubagentMiddleware

        middleware = BackgroundSubagentMiddleware(*args, **kwargs)
        self.made.append(middleware)
        return middleware

    def task(self, task_id: str) -> Any:
        """The live entry of a local task, in whichever of this test's runtimes runs it."""
        for middleware in self.made:
            task = middleware.runtime.table.get(task_id)
            if task is not None:
                return task
        return None

    def status(self, task_id: str) -> str | None:
        task = self.task(task_id)
        return task.fields["status"] if task is not None else None

    def close(self) -> None:
        for middleware in self.made:
            middleware.close()


@pytest.fixture
def background():
    """``background(specs, **options)`` builds a middleware; every one is closed after the test."""
    made = Backgrounds()
    yield made
    made.close()


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, every: float = 0.02) -> Any:
    """Poll until ``predicate()`` is truthy; fail the test after ``timeout`` seconds.

    The timeout is a hang detector, not a budget: a condition that holds returns at once, and a loaded
    machine (the suite must pass on one) can take many times longer than a quiet one.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(every)


def returns(call: Callable[[], Any], timeout: float = 120.0) -> Any:
    """``call()``'s value (or its exception); fail the test if it has not returned after ``timeout`` seconds.

    A hang guard, not a budget (as :func:`wait_for`'s timeout): far above what a loaded machine takes, and short of
    forever, which is how long a call that waits on a hung server takes. The call runs in a daemon thread, so a
    hung one is left behind instead of holding the test.
    """
    ended: list[tuple[bool, Any]] = []

    def target() -> None:
        try:
            ended.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - raised again in the test's thread
            ended.append((False, exc))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if not ended:
        raise AssertionError(f"the call had not returned after {timeout}s: a hang")
    ok, value = ended[0]
    if not ok:
        raise value
    return value


def started_ids(messages: list[Any]) -> list[str]:
    """Task ids from the start_async_task results in a conversation, in order."""
    text = "\n".join(m.text for m in messages if m.type == "tool")
    return re.findall(r"Started background task (\w+)", text)


def start(*jobs: tuple[str, str]) -> dict[str, Any]:
    """A parent reply starting one background task per (description, subagent_type)."""
    return {"tool_calls": [tool_call("start_async_task", description=d, subagent_type=t) for d, t in jobs]}


def remote_parent(url: str, jobs: list[str], graph_id: str = "scripted_worker", **extra: Any) -> tuple[Any, Any, dict]:
    """A parent agent (its middleware, and a config of a fresh thread) whose turn "PARENT go" starts ``jobs``
    as tasks of the remote subagent ``remote-worker`` (``graph_id`` at ``url``; ``extra``: more spec fields)."""
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from deep_agent._testing import ScriptedChatModel
    from middleware import BackgroundSubagentMiddleware

    spec = {"name": "remote-worker", "description": "Works on a LangGraph Server.", "graph_id": graph_id,
            "url": url, **extra}
    middleware = BackgroundSubagentMiddleware([spec], settings=DelegationSettings.of(general_purpose=False))
    model = ScriptedChatModel(rules=[("PARENT go", [start(*[(j, "remote-worker") for j in jobs]), "ok"])],
                              default="ok")
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    return agent, middleware, {"configurable": {"thread_id": f"remote-parent-{time.monotonic_ns()}"}}


def on_task(tool: str, index: int = 0, **args: Any) -> Callable[[list[Any]], dict[str, Any]]:
    """A parent reply calling ``tool`` on the ``index``-th started task (its id read from the history)."""
    return lambda messages: {"tool_calls": [tool_call(tool, task_id=started_ids(messages)[index], **args)]}


def last_tool_result(state: dict[str, Any]) -> Any:
    return next(m for m in reversed(state["messages"]) if m.type == "tool")


def as_json(message: Any) -> Any:
    return json.loads(message.content)


def notices(state: dict[str, Any]) -> list[str]:
    return [m.text for m in state["messages"] if m.type == "human" and m.text.startswith(NOTICE)]


def ledger(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(state.get("async_tasks") or {})


def starts_one_worker_task() -> Any:
    """A parent model that starts one background ``worker`` task ("do X") on "go", then answers "ok"."""
    from deep_agent._testing import ScriptedChatModel

    return ScriptedChatModel(
        rules=[("go", [{"tool_calls": [tool_call("start_async_task", description="do X",
                                                 subagent_type="worker")]}, "started"])],
        default="ok")


def steer(middleware: Any, state: dict[str, Any], task_id: str, text: str, parent_model: Any) -> str:
    """Send ``text`` to a running local task as the parent's ``update_async_task`` would; what it was told."""
    from subagents.background._local import known_task
    from subagents._outcome import TaskCall

    task = known_task(task_id)
    assert task is not None, f"task {task_id} is not running in this process"
    record = {**state["async_tasks"][task_id], **task.fields}
    call = TaskCall(subagent_type="worker", description="", parent_state=state, tool_call_id=None,
                    parent_config={}, parent_model=parent_model, parent_tools=[])
    _, what = middleware.runtime.run(middleware.tasks.update(record, text, call))
    return str(what)


def run_script(path: str, *args: str, timeout: float = 60) -> dict[str, Any]:
    """Run a test file as a separate process (its first parent process); return its last JSON line."""
    paths = (str(REPO), str(TESTS), os.environ.get("PYTHONPATH"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    done = subprocess.run([sys.executable, path, *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


class Turns:
    """Parent turns on one SQLite file, with invoke or ainvoke: a parent process after a restart.

    Each turn opens the file anew (``SqliteSaver`` or ``AsyncSqliteSaver``),
    so nothing but the file carries over from the process that wrote it.
    """

    def __init__(self, mode: str, db: Path, thread_id: str, model: Any, middleware: Any) -> None:
        self.mode, self.db, self.model, self.middleware = mode, str(db), model, middleware
        self.config = {"configurable": {"thread_id": thread_id}}

    def __call__(self, text: str) -> dict[str, Any]:
        if self.mode == "sync":
            from langgraph.checkpoint.sqlite import SqliteSaver

            with SqliteSaver.from_conn_string(self.db) as saver:
                return self._agent(saver).invoke(_user(text), self.config)
        return asyncio.run(self._aturn(text))

    def state(self) -> dict[str, Any]:
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(self.db) as saver:
            return dict(self._agent(saver).get_state(self.config).values)

    async def _aturn(self, text: str) -> dict[str, Any]:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(self.db) as saver:
            return await self._agent(saver).ainvoke(_user(text), self.config)

    def _agent(self, saver: Any) -> Any:
        from langchain.agents import create_agent

        return create_agent(self.model, middleware=[self.middleware], checkpointer=saver)


def _user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}
