"""A background child's own conversation, standing in for the child graph the shared runner invokes.

A local background task runs on its own thread of its own in-memory
checkpointer, not as a subgraph of the parent (whose step has already
ended); follow-ups and approvals continue that thread. :class:`ChildSession`
decides what each invocation continues; the local runner hands it to
:class:`~subagents.TaskRunner` as the call's graph.

Example::

    session = ChildSession("t1", TaskMeter())
    session.graph = registry.graph("researcher", parent_model=model, parent_tools=[])
    outcome = await runner.arun(dataclasses.replace(call, graph=session))
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.pregel import Pregel
from langgraph.types import Command

from subagents._meter import TaskMeter
from subagents.background._inbox import INBOX_METADATA_KEY


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
        # Cleared before the run, not after: a run that raises (a resumed child failing after its
        # answer) leaves no earlier request behind to be shown as still waiting.
        self.interrupts = []
        result = await self._graph().ainvoke(payload, run_config)
        self.interrupts = list(result.get("__interrupt__") or []) if isinstance(result, Mapping) else []
        self._last = result
        return result

    def invoke(self, inputs: Mapping[str, Any], config: Mapping[str, Any]) -> Any:
        raise RuntimeError("background children run on the background loop, with ainvoke")


def session_size(session: ChildSession) -> int:
    """Roughly how many bytes the session's conversation holds (its text)."""
    last = session._last
    messages = last.get("messages", []) if isinstance(last, Mapping) else []
    return sum(len(getattr(m, "text", "") or "") + 200 for m in messages)
