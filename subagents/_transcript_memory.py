"""The in-process transcript table: recent transcripts, bounded by size, not count.

Used only when a run has no checkpointer and no other sink; the oldest
transcripts are dropped first once the table holds more than ``max_bytes``
(estimated from the messages' text).

Example::

    table = TranscriptTable(max_bytes=1_000_000)
    table.put("task-1", messages)
    table.get("task-1")
"""

from __future__ import annotations

import collections
import threading

from langchain_core.messages import BaseMessage

DEFAULT_MAX_BYTES = 32 * 1024 * 1024


class TranscriptTable:
    """Task id -> messages, oldest evicted first past ``max_bytes``."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: collections.OrderedDict[str, tuple[list[BaseMessage], int]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def put(self, task_id: str, messages: list[BaseMessage]) -> None:
        size = sum(_size(m) for m in messages)
        with self._lock:
            old = self._items.pop(task_id, None)
            if old is not None:
                self.bytes -= old[1]
            self._items[task_id] = (list(messages), size)
            self.bytes += size
            while self.bytes > self.max_bytes and len(self._items) > 1:
                _, (_, dropped) = self._items.popitem(last=False)
                self.bytes -= dropped

    def get(self, task_id: str) -> list[BaseMessage] | None:
        with self._lock:
            item = self._items.get(task_id)
        return None if item is None else list(item[0])

    def __len__(self) -> int:
        return len(self._items)


def _size(message: BaseMessage) -> int:
    content = message.content
    text = content if isinstance(content, str) else str(content)
    return len(text) + 200  # fixed cost per message: ids, type, metadata


MEMORY = TranscriptTable()
"""The process-wide table the memory sink writes to."""
