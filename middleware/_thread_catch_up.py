"""A served parent's thread shows how its in-process background tasks ended without waiting for its next run: once
idle, its ledger is written with ``update_state`` (a notify run, deepagents' way, would cost a model call)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from subagents.background import BackgroundTasks, RuntimeClosed
from subagents.background._local import LocalTask
from subagents.background._remote import in_process_client

if TYPE_CHECKING:
    from langgraph_sdk.client import LangGraphClient

log = logging.getLogger(__name__)

IDLE_POLL_S = 0.5  # how often a busy thread is asked again whether its run has ended
IDLE_WAIT_S = 120.0  # how long a settled task waits for its thread's run to end (a longer one catches up itself)


class ThreadCatchUp:
    """An ``on_settled`` listener: catch the task's parent thread up on the server this process runs."""

    def __init__(self, tasks: BackgroundTasks, ledger_key: str) -> None:
        self.tasks = tasks
        self.ledger_key = ledger_key
        self._client: LangGraphClient | None = None  # made once, on the runtime's loop where every request is sent
        self._due: set[str] = set()  # threads a catch-up waits for: a thousand tasks ending make one each

    def __call__(self, task: LocalTask) -> None:
        thread_id = (task.call.parent_config.get("configurable") or {}).get("thread_id")
        if thread_id is None or str(thread_id) in self._due:
            return
        self._client = self._client or in_process_client(timeout_s=30.0)
        if self._client is None:  # not served: the caller's next run reads the ledger
            return
        with contextlib.suppress(RuntimeClosed):
            self.tasks.runtime.spawn(self._catch_up(self._client, str(thread_id)))
            self._due.add(str(thread_id))

    async def _catch_up(self, client: LangGraphClient, thread_id: str) -> None:
        try:
            for _ in range(int(IDLE_WAIT_S / IDLE_POLL_S)):
                status = (await client.threads.get(thread_id)).get("status")
                if status != "busy":
                    break
                await asyncio.sleep(IDLE_POLL_S)
            if status != "idle":  # still busy, or waiting on a person or failed: its next run catches up
                return
            self._due.discard(thread_id)  # a task settling from here on is caught up by a catch-up of its own
            values = (await client.threads.get_state(thread_id)).get("values") or {}
            ledger = values.get(self.ledger_key) if isinstance(values, Mapping) else None
            if not isinstance(ledger, Mapping):
                return
            local = {i: r for i, r in ledger.items() if isinstance(r, Mapping) and r.get("runner") == "local"}
            updates = await self.tasks.refresh(local)
            if updates:
                await client.threads.update_state(thread_id, {self.ledger_key: updates})
        except Exception:  # noqa: BLE001 - the thread's next run catches up anyway
            log.debug("could not catch thread %s up with its background tasks", thread_id, exc_info=True)
        finally:
            self._due.discard(thread_id)
