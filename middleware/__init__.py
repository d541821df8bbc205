"""AgentMiddleware classes that give an agent governed subagents: the public names are ``__all__``. Names are imported
on first use (PEP 562): an agent without background tasks never loads their runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subagents.exports import lazy_exports

if TYPE_CHECKING:
    from middleware.background import AsyncSubAgentMiddleware as AsyncSubAgentMiddleware
    from middleware.background import AsyncSubAgentState as AsyncSubAgentState
    from middleware.background import AsyncTaskLedgerState as AsyncTaskLedgerState
    from middleware.background import BackgroundSubagentMiddleware as BackgroundSubagentMiddleware
    from middleware.dynamic import DynamicSubagentState as DynamicSubagentState
    from middleware.limits import DelegationLimit as DelegationLimit
    from middleware.limits import ForceDelegation as ForceDelegation
    from middleware.limits import ForceSetting as ForceSetting
    from middleware.limits import ForceToolUse as ForceToolUse
    from middleware.limits import ReturnChildAnswer as ReturnChildAnswer
    from middleware.subagents import SubAgentMiddleware as SubAgentMiddleware
    from middleware.task_tool import ASYNC_LEDGER_KEY as ASYNC_LEDGER_KEY
    from middleware.task_tool import LEDGER_KEY as LEDGER_KEY
    from middleware.task_tool import TASK_TOOL_NAME as TASK_TOOL_NAME
    from middleware.task_tool import SubagentLedgerState as SubagentLedgerState
    from middleware.task_tool import TaskToolInput as TaskToolInput
    from middleware.task_tool import TaskToolInputWithSchema as TaskToolInputWithSchema
    from subagents.settings import DEFAULT_MAX_DELEGATIONS as DEFAULT_MAX_DELEGATIONS
    from subagents.truncation import RetryTruncated as RetryTruncated

_WHERE = {name: module for module, names in {
    "middleware.background": ("AsyncSubAgentMiddleware", "AsyncSubAgentState", "AsyncTaskLedgerState",
        "BackgroundSubagentMiddleware"),
    "middleware.dynamic": ("DynamicSubagentState",),
    "middleware.limits": ("DelegationLimit", "ForceDelegation", "ForceSetting", "ForceToolUse", "ReturnChildAnswer"),
    "middleware.subagents": ("SubAgentMiddleware",),
    "middleware.task_tool": ("ASYNC_LEDGER_KEY", "LEDGER_KEY", "SubagentLedgerState", "TASK_TOOL_NAME",
        "TaskToolInput", "TaskToolInputWithSchema"),
    "subagents.settings": ("DEFAULT_MAX_DELEGATIONS",),
    "subagents.truncation": ("RetryTruncated",),
}.items() for name in names}

__all__ = sorted(_WHERE)

__getattr__ = lazy_exports(__name__, _WHERE)
