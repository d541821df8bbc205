"""The table of one runtime's local tasks: found by id in O(1), finished ones evicted by age and bytes.

Running and waiting tasks stay as long as they live. A finished task stays
so that the parent can read its outcome and follow it up in the same
conversation, but not forever: it is dropped once it has been finished for
``max_age_s``, or as soon as the finished tasks together hold more than
``max_bytes`` (oldest first). Finished tasks are kept in the order they
finished, so starting, finishing and evicting a task each cost O(1)
(amortised), whatever the size of the table. An evicted task loses nothing
the parent needs: its outcome is in the ledger or the outcome store, and a
follow-up rebuilds its conversation from the record.

Example::

    table = TaskTable(max_age_s=60, max_bytes=1_000_000)
    table.put("t1", task)
    table.settle("t1", size=2_048, at=time.time())   # seconds until the next eviction is due
    table.evict(time.time() + 61)                     # drops t1
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

DEFAULT_MAX_AGE_S = 3600.0
"""How long a finished task stays in memory: an hour."""

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""How much the finished tasks of one runtime may hold together: 64 MiB."""


class TaskTable(Generic[T]):
    """Tasks by id; finished ones in the order they finished, with their sizes.

    Args:
        max_age_s: seconds a finished task is kept.
        max_bytes: bytes all finished tasks may hold together.
    """

    def __init__(self, max_age_s: float = DEFAULT_MAX_AGE_S, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if not max_age_s > 0:
            raise ValueError(f"max_age_s must be positive (got {max_age_s!r})")
        if max_bytes < 0:
            raise ValueError(f"max_bytes must not be negative (got {max_bytes!r})")
        self.max_age_s = float(max_age_s)
        self.max_bytes = int(max_bytes)
        self._tasks: dict[str, T] = {}
        self._settled: collections.OrderedDict[str, tuple[float, int]] = collections.OrderedDict()
        self.settled_bytes = 0

    def __len__(self) -> int:
        return len(self._tasks)

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._tasks

    def get(self, task_id: str) -> T | None:
        return self._tasks.get(task_id)

    def put(self, task_id: str, task: T) -> None:
        """Add (or replace) a live task."""
        self._unsettle(task_id)
        self._tasks[task_id] = task

    def revive(self, task_id: str) -> None:
        """A finished task runs again (a follow-up, a retry, an answer): it is no longer evictable."""
        self._unsettle(task_id)

    def settle(self, task_id: str, *, size: int, at: float) -> float | None:
        """Mark a task finished at ``at``, holding ``size`` bytes; evict what is due.

        Returns the seconds until the next eviction by age is due, or ``None``
        if no finished task is left.
        """
        if task_id not in self._tasks:
            return self.next_due(at)
        self._unsettle(task_id)
        self._settled[task_id] = (at, max(0, int(size)))
        self.settled_bytes += max(0, int(size))
        return self.evict(at)

    def evict(self, at: float) -> float | None:
        """Drop finished tasks older than ``max_age_s`` or beyond ``max_bytes``, oldest first."""
        while self._settled:
            task_id, (settled_at, size) = next(iter(self._settled.items()))
            if at - settled_at < self.max_age_s and self.settled_bytes <= self.max_bytes:
                break
            self._settled.popitem(last=False)
            self.settled_bytes -= size
            self._tasks.pop(task_id, None)
        return self.next_due(at)

    def next_due(self, at: float) -> float | None:
        """Seconds until the oldest finished task is due for eviction (``None``: none is kept)."""
        if not self._settled:
            return None
        settled_at, _size = next(iter(self._settled.values()))
        return max(0.0, settled_at + self.max_age_s - at)

    def unsettled(self) -> Iterator[T]:
        """The tasks that have not finished (a snapshot, safe to change the table while iterating)."""
        return iter([t for i, t in self._tasks.items() if i not in self._settled])

    def _unsettle(self, task_id: str) -> None:
        entry = self._settled.pop(task_id, None)
        if entry is not None:
            self.settled_bytes -= entry[1]
