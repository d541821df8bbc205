"""Steering a running background child: an inbox read before each model call.

A model call cannot be interrupted halfway, so a new instruction for a
running child waits in the task's inbox and :class:`SteeringInbox` (a child
middleware the local runner adds to every built background subagent) hands
it to the child as a ``HumanMessage`` just before the child's next model
call. The child finds its task id in its run's metadata
(:data:`INBOX_METADATA_KEY`), so one middleware instance serves every task
of its runtime. The inboxes belong to the runtime (an :class:`Inboxes`), not
to the module: closing the runtime drops them.

Whatever is still in the inbox when a run ends (a message that came after
the last model call, or a caller's compiled graph without this middleware)
is delivered by the runner as a follow-up in the same conversation: a
steering message is never dropped.

Example::

    inboxes = Inboxes()
    inboxes.post("task-1", "Focus on 2024 only.")
    # ...the running child sees "[Update from your caller] Focus on 2024 only."
"""

from __future__ import annotations

import collections
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import HumanMessage

INBOX_METADATA_KEY = "background_task_id"
"""Run metadata naming the background task a child run belongs to."""

STEERING_PREFIX = "[Update from your caller] "

class Inboxes:
    """Steering messages waiting for their tasks, by task id."""

    def __init__(self) -> None:
        self._boxes: dict[str, collections.deque[str]] = {}

    def post(self, task_id: str, message: str) -> None:
        """Queue ``message`` for the task's next model call."""
        self._boxes.setdefault(task_id, collections.deque()).append(message)

    def take(self, task_id: str) -> list[str]:
        """Remove and return everything queued for the task (its inbox goes with it)."""
        box = self._boxes.pop(task_id, None)
        return list(box) if box else []

    def pending(self, task_id: str) -> int:
        """How many messages wait for the task."""
        return len(self._boxes.get(task_id) or ())


def steering_message(text: str) -> HumanMessage:
    """How a steering message reaches the child."""
    return HumanMessage(content=STEERING_PREFIX + text)


class SteeringInbox(AgentMiddleware):
    """Delivers queued steering messages before each model call of a background child."""

    name = "SteeringInbox"

    def __init__(self, inboxes: Inboxes) -> None:
        super().__init__()
        self.inboxes = inboxes

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return _deliver(self.inboxes)

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return _deliver(self.inboxes)


def _deliver(inboxes: Inboxes) -> dict[str, Any] | None:
    from langgraph.config import get_config

    try:
        task_id = (get_config().get("metadata") or {}).get(INBOX_METADATA_KEY)
    except RuntimeError:  # not inside a run: nothing to deliver
        return None
    if not task_id:
        return None
    messages = inboxes.take(task_id)
    if not messages:
        return None
    return {"messages": [steering_message(m) for m in messages]}
