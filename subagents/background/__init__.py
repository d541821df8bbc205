"""Background subagents: tasks that outlive the parent's turn, run here or on a LangGraph Server (started by
:class:`middleware.BackgroundSubagentMiddleware`, waited for with :func:`wait_for_background`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subagents._exports import lazy_exports

if TYPE_CHECKING:
    from subagents._errors import RuntimeClosed as RuntimeClosed
    from subagents._errors import RuntimeStalled as RuntimeStalled
    from subagents._errors import TaskStateError as TaskStateError
    from subagents._spec import RemoteSubagentSpec as RemoteSubagentSpec
    from subagents.background._ledger import ACTIVE_STATUSES as ACTIVE_STATUSES
    from subagents.background._ledger import NOTEWORTHY_STATUSES as NOTEWORTHY_STATUSES
    from subagents.background._ledger import AsyncTaskRecord as AsyncTaskRecord
    from subagents.background._ledger import AsyncTaskStatus as AsyncTaskStatus
    from subagents.background._ledger import merge_async_records as merge_async_records
    from subagents.background._ledger import record_problem as record_problem
    from subagents.background._ledger import usable_records as usable_records
    from subagents.background._local import known_task as known_task
    from subagents.background._remote import OrphanSearch as OrphanSearch
    from subagents.background._remote import adopt_orphans as adopt_orphans
    from subagents.background._runtime import BackgroundRuntime as BackgroundRuntime
    from subagents.background._runtime import LoopModels as LoopModels
    from subagents.background._runtime import OwnLoopModels as OwnLoopModels
    from subagents.background._runtime import SteeringInbox as SteeringInbox
    from subagents.background._tasks import BackgroundTasks as BackgroundTasks
    from subagents.background._tasks import aanswer_approval as aanswer_approval
    from subagents.background._tasks import answer_approval as answer_approval
    from subagents.background._tasks import wait_for_background as wait_for_background

__getattr__ = lazy_exports(__name__)  # and __all__: the names re-exported above
