"""Background subagents: tasks that outlive the parent's turn, run here or on a LangGraph Server (started by
:class:`middleware.BackgroundSubagentMiddleware`, waited for with :func:`wait_for_background`)."""

from subagents.background.ledger import (
    ACTIVE_STATUSES,
    NOTEWORTHY_STATUSES,
    AsyncTaskRecord,
    AsyncTaskStatus,
    merge_async_records,
    record_problem,
    usable_records,
)
from subagents.background.local import known_task
from subagents.background.remote import OrphanSearch, adopt_orphans
from subagents.background.runtime import BackgroundRuntime, LoopModels, OwnLoopModels, SteeringInbox
from subagents.background.tasks import BackgroundTasks, aanswer_approval, answer_approval, wait_for_background
from subagents.errors import RuntimeClosed, RuntimeStalled, TaskStateError
from subagents.spec import RemoteSubagentSpec

__all__ = [
    "ACTIVE_STATUSES",
    "AsyncTaskRecord",
    "AsyncTaskStatus",
    "BackgroundRuntime",
    "BackgroundTasks",
    "LoopModels",
    "NOTEWORTHY_STATUSES",
    "OrphanSearch",
    "OwnLoopModels",
    "RemoteSubagentSpec",
    "RuntimeClosed",
    "RuntimeStalled",
    "SteeringInbox",
    "TaskStateError",
    "aanswer_approval",
    "adopt_orphans",
    "answer_approval",
    "known_task",
    "merge_async_records",
    "record_problem",
    "usable_records",
    "wait_for_background",
]
