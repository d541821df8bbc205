"""Background subagents: tasks that outlive the parent's turn, run here or on a LangGraph Server (started by
:class:`middleware.BackgroundSubagentMiddleware`, waited for with :func:`wait_for_background`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subagents.exports import lazy_exports

if TYPE_CHECKING:
    from subagents.background.ledger import ACTIVE_STATUSES as ACTIVE_STATUSES
    from subagents.background.ledger import NOTEWORTHY_STATUSES as NOTEWORTHY_STATUSES
    from subagents.background.ledger import AsyncTaskRecord as AsyncTaskRecord
    from subagents.background.ledger import AsyncTaskStatus as AsyncTaskStatus
    from subagents.background.ledger import merge_async_records as merge_async_records
    from subagents.background.ledger import record_problem as record_problem
    from subagents.background.ledger import usable_records as usable_records
    from subagents.background.local import known_task as known_task
    from subagents.background.remote import OrphanSearch as OrphanSearch
    from subagents.background.remote import adopt_orphans as adopt_orphans
    from subagents.background.runtime import BackgroundRuntime as BackgroundRuntime
    from subagents.background.runtime import LoopModels as LoopModels
    from subagents.background.runtime import OwnLoopModels as OwnLoopModels
    from subagents.background.runtime import SteeringInbox as SteeringInbox
    from subagents.background.tasks import BackgroundTasks as BackgroundTasks
    from subagents.background.tasks import aanswer_approval as aanswer_approval
    from subagents.background.tasks import answer_approval as answer_approval
    from subagents.background.tasks import wait_for_background as wait_for_background
    from subagents.errors import RuntimeClosed as RuntimeClosed
    from subagents.errors import RuntimeStalled as RuntimeStalled
    from subagents.errors import TaskStateError as TaskStateError
    from subagents.spec import RemoteSubagentSpec as RemoteSubagentSpec

__getattr__ = lazy_exports(__name__)  # and __all__: the names re-exported above
