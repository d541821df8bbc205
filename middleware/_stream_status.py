"""A failed child reads as failed on ``stream_events(version="v3")``, which takes a child run's end status from the
parent's ``tools`` task that spawned it (a failing child never fails it)."""

from __future__ import annotations

from typing import ClassVar

from langgraph.stream import ProtocolEvent, StreamTransformer

EVENT_TYPE = "subagent_task"


class ChildFailureTransformer(StreamTransformer):
    """Puts the child's error on the parent task's result event (with none of its own) before LangGraph reads it."""

    before_builtins: ClassVar[bool] = True
    required_stream_modes: ClassVar[tuple[str, ...]] = ("custom", "tasks")

    def __init__(self, scope: tuple[str, ...] = ()) -> None:
        super().__init__(scope)
        self._segments: dict[str, str] = {}  # our task id -> the child's namespace segment
        self._failed: dict[str, str] = {}  # the spawning parent task's id -> the child's error

    def init(self) -> dict[str, object]:
        return {}

    def process(self, event: ProtocolEvent) -> bool:
        method = event["method"]
        data = event["params"].get("data")
        if method == "custom" and isinstance(data, dict) and data.get("type") == EVENT_TYPE:
            task_id, namespace = str(data.get("task_id")), data.get("namespace")
            if data.get("status") == "running" and namespace:
                self._segments[task_id] = str(namespace[-1])
            elif data.get("status") in ("completed", "error", "cancelled"):
                segment = self._segments.pop(task_id, None)
                if segment is not None and data.get("status") == "error":
                    # A namespace segment is "<node>:<task id>"; the task id is what the parent's result carries.
                    self._failed[segment.rpartition(":")[2]] = str(data.get("error") or "subagent failed")
        elif method == "tasks" and isinstance(data, dict) and "result" in data and not data.get("error"):
            error = self._failed.pop(str(data.get("id")), None)
            if error is not None:
                data["error"] = error
        return True
