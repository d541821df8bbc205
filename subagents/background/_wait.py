"""Waiting for background tasks to settle, local and remote, for scripts, demos, tests and benchmarks.

An application simply carries on (finished tasks are announced before the
parent's next model call); a script that wants a result before its next
turn waits here. What is waited for:

* local tasks this process runs: until each is ``completed``, ``error``,
  ``cancelled`` or ``lost``, or waits for approval (as for remote tasks:
  nothing more happens there without the parent);
* remote tasks, when ``tasks`` (the :class:`~subagents.BackgroundTasks` that
  started them, ``middleware.tasks``) is given: until each has settled or
  waits for approval (nothing more happens there without the parent),
  polled in batches every ``every_s`` (:mod:`subagents.background._remote_wait`).
  A server that hangs or dies makes the wait return ``False`` at its
  deadline, never raise.
  Without ``tasks`` a ledger with live remote tasks is refused, never
  reported as settled.

Example::

    state = agent.invoke({"messages": [...]}, config)
    wait_for_background(state["async_tasks"], tasks=middleware.tasks)
"""

from __future__ import annotations

import concurrent.futures
import math
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from subagents.background._ledger import ACTIVE_STATUSES, NOTEWORTHY_STATUSES, checked_ledger
from subagents.background._owner import Owner
from subagents.background._remote_wait import settle_remote
from subagents.background._runtime import BackgroundRuntime, RuntimeClosed

if TYPE_CHECKING:
    from subagents.background._tasks import BackgroundTasks

_REMOTE_WAITING = ACTIVE_STATUSES
"""Remote statuses that still change on their own."""


def wait_for_background(ledger: Mapping[str, Any], timeout_s: float = 30.0, *,
                        tasks: BackgroundTasks | None = None, every_s: float = 0.1) -> bool:
    """Block until the tasks of ``ledger`` (an ``async_tasks`` mapping) have settled; ``False`` on timeout.

    Raises ``ValueError`` (naming ``tasks``) if the ledger has live remote
    tasks and no ``tasks`` to poll them with, and (naming the task id and
    field) if a record is not one it can wait for: not a mapping, an ``id``
    other than its key, no ``status``, or a live remote task without its
    ``agent_type`` or ``thread_id``.
    """
    if isinstance(every_s, bool) or not isinstance(every_s, (int, float)) or not every_s > 0:
        # 0, negative or NaN: back-to-back polls, a busy loop of requests
        raise ValueError(f"wait_for_background: every_s must be a number of seconds > 0 (got {every_s!r})")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or math.isnan(timeout_s):
        raise ValueError(f"wait_for_background: timeout_s must be a number of seconds (got {timeout_s!r})")
    deadline = time.monotonic() + timeout_s
    ledger = checked_ledger(ledger, "wait_for_background")
    remote = {k: v for k, v in ledger.items() if v.get("runner") == "remote"}
    local = {k: v for k, v in ledger.items() if k not in remote}
    if any(r.get("status") in _REMOTE_WAITING for r in remote.values()) and tasks is None:
        raise ValueError(
            "wait_for_background: the ledger has remote tasks still running; pass tasks= "
            "(the BackgroundTasks that started them, e.g. middleware.tasks) to wait for them"
        )
    if not _wait_local(local, timeout_s=timeout_s):
        return False
    if tasks is None or not any(r.get("status") in _REMOTE_WAITING for r in remote.values()):
        return True
    margin = max(deadline - time.monotonic(), 0.0) + 1.0
    try:  # bounded on the loop by the deadline itself; the margin is for a loop that is stuck
        _, settled = tasks.runtime.run(settle_remote(tasks, remote, deadline=deadline, every_s=every_s),
                                       timeout=margin if margin < threading.TIMEOUT_MAX else None)
    except (concurrent.futures.TimeoutError, RuntimeClosed):  # a loop that stalls or stops: not settled
        return False
    return settled


def _wait_local(ledger: Mapping[str, Any], timeout_s: float = 30.0) -> bool:
    """Block until the local tasks of ``ledger`` (an ``async_tasks`` mapping) run in this process have settled.

    For scripts, demos and tests that want a background result before the
    next turn; an application simply carries on. Tasks of other processes
    or of closed runtimes are not waited for. Returns ``False`` on timeout.
    """
    deadline = time.monotonic() + timeout_s
    for task_id, record in ledger.items():
        owner = Owner.parse(record.get("owner")) if isinstance(record, Mapping) else None
        runtime = BackgroundRuntime.find(owner.runtime) if owner is not None else None
        while runtime is not None and not runtime.closed:
            task = runtime.table.get(task_id)
            if task is None or task.fields.get("status") in NOTEWORTHY_STATUSES:  # settled, or waits for approval
                break
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
    return True
