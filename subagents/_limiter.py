"""A cap on how many children of one parent run at once, for threads and event loops.

Extra delegations wait their turn; none fails because of the cap. The async
side keeps one semaphore per event loop, because an ``asyncio.Semaphore``
belongs to the loop it first waited on.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any


class ConcurrencyLimit:
    """``with limit.hold():`` or ``async with limit.ahold():``; ``None`` means no cap."""

    def __init__(self, limit: int | None) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"max_concurrent_tasks must be at least 1 (got {limit})")
        self.limit = limit
        self._threads = threading.BoundedSemaphore(limit) if limit else None
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def hold(self) -> AbstractContextManager[Any]:
        """Wait for a slot on this thread (nothing to wait for without a cap)."""
        return self._threads if self._threads is not None else contextlib.nullcontext()

    def ahold(self) -> AbstractAsyncContextManager[Any]:
        """Wait for a slot on the running event loop (nothing to wait for without a cap)."""
        return contextlib.nullcontext() if self.limit is None else self._ahold()

    @contextlib.asynccontextmanager
    async def _ahold(self) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        with self._lock:
            sem = self._loops.get(loop)
            if sem is None:
                sem = self._loops[loop] = asyncio.Semaphore(self.limit or 1)
        async with sem:
            yield
