"""The six background-task tools: their argument schemas, and both their sync and async faces.

Each tool is a thin shell: the sync face (for ``invoke`` parents) blocks on
the handlers' background runtime, the async face (for ``ainvoke`` parents) awaits it, and
both run the same coroutine of the :class:`BackgroundToolHandlers` they are
built for. The tools carry the delegation tag, so no child ever holds them.

Example::

    tools = background_tools(middleware)   # middleware implements BackgroundToolHandlers
    [t.name for t in tools]                # ['start_async_task', 'check_async_task', ...]
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Literal, Protocol

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.types import Command
from pydantic import BaseModel, Field

from middleware import _background_prompts as words
from middleware._task_tool import TaskToolInput
from subagents import DELEGATION_TOOL_TAG, safe_text
from subagents.background import AsyncTaskStatus, BackgroundRuntime, RuntimeClosed

START_TOOL_NAME = "start_async_task"
"""The tool that starts a background task (each tool is named for its function below)."""


class TaskIdInput(BaseModel):
    """Arguments of the tools that act on one task."""

    task_id: str = Field(description="The task id that start_async_task returned.")


class UpdateTaskInput(BaseModel):
    """Arguments of ``update_async_task``."""

    task_id: str = Field(description="The task id that start_async_task returned.")
    message: str = Field(default="", description="The new instruction, the follow-up, or the reason for a "
                                                 "decision.")
    decision: Literal["approve", "reject"] | None = Field(
        default=None,
        description="Only for a task waiting for approval: approve or reject what it asked; "
                    "message is then the reason the task sees.",
    )


class ListTasksInput(BaseModel):
    """Arguments of ``list_async_tasks``."""

    status: AsyncTaskStatus | None = Field(
        default=None, description="Only tasks with this status; all tasks when omitted."
    )


class BackgroundToolHandlers(Protocol):
    """What the tools call; each handler returns the tool's ``Command``, run on ``runtime``'s loop."""

    runtime: BackgroundRuntime

    async def handle_start(self, runtime: ToolRuntime, description: str, subagent_type: str) -> Command: ...
    async def handle_check(self, runtime: ToolRuntime, task_id: str) -> Command: ...
    async def handle_update(self, runtime: ToolRuntime, task_id: str, message: str,
                            decision: str | None = None) -> Command: ...
    async def handle_cancel(self, runtime: ToolRuntime, task_id: str) -> Command: ...
    async def handle_list(self, runtime: ToolRuntime, status: str | None) -> Command: ...
    async def handle_retry(self, runtime: ToolRuntime, task_id: str) -> Command: ...


def background_tools(handlers: BackgroundToolHandlers) -> list[StructuredTool]:
    """The six tools, bound to ``handlers``."""
    loop = handlers.runtime

    # Each face names `runtime: ToolRuntime` in its signature: that is how the
    # tool node knows to inject the runtime.
    def start_async_task(description: str, subagent_type: str, runtime: ToolRuntime) -> Command:
        return _blocking(loop, runtime, handlers.handle_start(runtime, description, subagent_type))

    async def astart_async_task(description: str, subagent_type: str, runtime: ToolRuntime) -> Command:
        return await _awaiting(loop, runtime, handlers.handle_start(runtime, description, subagent_type))

    def check_async_task(task_id: str, runtime: ToolRuntime) -> Command:
        return _blocking(loop, runtime, handlers.handle_check(runtime, task_id))

    async def acheck_async_task(task_id: str, runtime: ToolRuntime) -> Command:
        return await _awaiting(loop, runtime, handlers.handle_check(runtime, task_id))

    def update_async_task(task_id: str, runtime: ToolRuntime, message: str = "",
                          decision: str | None = None) -> Command:
        return _blocking(loop, runtime, handlers.handle_update(runtime, task_id, message, decision))

    async def aupdate_async_task(task_id: str, runtime: ToolRuntime, message: str = "",
                                 decision: str | None = None) -> Command:
        return await _awaiting(loop, runtime, handlers.handle_update(runtime, task_id, message, decision))

    def cancel_async_task(task_id: str, runtime: ToolRuntime) -> Command:
        return _blocking(loop, runtime, handlers.handle_cancel(runtime, task_id))

    async def acancel_async_task(task_id: str, runtime: ToolRuntime) -> Command:
        return await _awaiting(loop, runtime, handlers.handle_cancel(runtime, task_id))

    def list_async_tasks(runtime: ToolRuntime, status: str | None = None) -> Command:
        return _blocking(loop, runtime, handlers.handle_list(runtime, status))

    async def alist_async_tasks(runtime: ToolRuntime, status: str | None = None) -> Command:
        return await _awaiting(loop, runtime, handlers.handle_list(runtime, status))

    def retry_async_task(task_id: str, runtime: ToolRuntime) -> Command:
        return _blocking(loop, runtime, handlers.handle_retry(runtime, task_id))

    async def aretry_async_task(task_id: str, runtime: ToolRuntime) -> Command:
        return await _awaiting(loop, runtime, handlers.handle_retry(runtime, task_id))

    table: list[tuple[Callable[..., Any], Callable[..., Awaitable[Any]], type[BaseModel], str]] = [
        (start_async_task, astart_async_task, TaskToolInput, words.START_DESCRIPTION),
        (check_async_task, acheck_async_task, TaskIdInput, words.CHECK_DESCRIPTION),
        (update_async_task, aupdate_async_task, UpdateTaskInput, words.UPDATE_DESCRIPTION),
        (cancel_async_task, acancel_async_task, TaskIdInput, words.CANCEL_DESCRIPTION),
        (list_async_tasks, alist_async_tasks, ListTasksInput, words.LIST_DESCRIPTION),
        (retry_async_task, aretry_async_task, TaskIdInput, words.RETRY_DESCRIPTION),
    ]
    return [
        StructuredTool.from_function(
            func=func, coroutine=coro, name=func.__name__, description=text,
            args_schema=schema, infer_schema=False, metadata={DELEGATION_TOOL_TAG: True},
        )
        for func, coro, schema, text in table
    ]


def _blocking(loop: BackgroundRuntime, runtime: ToolRuntime, coro: Coroutine[Any, Any, Command]) -> Command:
    if loop.closed:
        coro.close()
        return _closed(runtime)
    try:
        return loop.run(coro)
    except RuntimeClosed as exc:
        return _closed(runtime, exc)


async def _awaiting(loop: BackgroundRuntime, runtime: ToolRuntime, coro: Coroutine[Any, Any, Command]) -> Command:
    if loop.closed:
        coro.close()
        return _closed(runtime)
    try:
        return await loop.arun(coro)
    except RuntimeClosed as exc:
        return _closed(runtime, exc)


def _closed(runtime: ToolRuntime, why: BaseException | None = None) -> Command:
    """The answer of every background tool once the runtime is closed (or its loop stalls): an error, never a crash."""
    reason = safe_text(why, 300) if why is not None else "the background runtime was closed"
    message = ToolMessage(content=f"Background tasks are unavailable: {reason}.",
                          tool_call_id=runtime.tool_call_id or "", status="error")
    return Command(update={"messages": [message]})
