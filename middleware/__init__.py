"""AgentMiddleware classes that give an agent governed subagents: the public names are ``__all__``. Names are imported
on first use (PEP 562): an agent without background tasks never loads their runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subagents._exports import lazy_exports

if TYPE_CHECKING:
    from middleware._background import AsyncSubAgentMiddleware as AsyncSubAgentMiddleware
    from middleware._background import AsyncSubAgentState as AsyncSubAgentState
    from middleware._background import AsyncTaskLedgerState as AsyncTaskLedgerState
    from middleware._background import BackgroundSubagentMiddleware as BackgroundSubagentMiddleware
    from middleware._dynamic import DynamicSubagentState as DynamicSubagentState
    from middleware._limits import DelegationLimit as DelegationLimit
    from middleware._limits import ForceDelegation as ForceDelegation
    from middleware._limits import ForceSetting as ForceSetting
    from middleware._limits import ForceToolUse as ForceToolUse
    from middleware._limits import ReturnChildAnswer as ReturnChildAnswer
    from middleware._subagents import SubAgentMiddleware as SubAgentMiddleware
    from middleware._task_tool import ASYNC_LEDGER_KEY as ASYNC_LEDGER_KEY
    from middleware._task_tool import LEDGER_KEY as LEDGER_KEY
    from middleware._task_tool import TASK_TOOL_NAME as TASK_TOOL_NAME
    from middleware._task_tool import SubagentLedgerState as SubagentLedgerState
    from middleware._task_tool import TaskToolInput as TaskToolInput
    from middleware._task_tool import TaskToolInputWithSchema as TaskToolInputWithSchema
    from subagents._truncation import RetryTruncated as RetryTruncated

_WHERE = {name: module for module, names in {
    "middleware._background": ("AsyncSubAgentMiddleware", "AsyncSubAgentState", "AsyncTaskLedgerState",
        "BackgroundSubagentMiddleware"),
    "middleware._dynamic": ("DynamicSubagentState",),
    "middleware._limits": ("DelegationLimit", "ForceDelegation", "ForceSetting", "ForceToolUse", "ReturnChildAnswer"),
    "middleware._subagents": ("SubAgentMiddleware",),
    "middleware._task_tool": ("ASYNC_LEDGER_KEY", "LEDGER_KEY", "SubagentLedgerState", "TASK_TOOL_NAME",
        "TaskToolInput", "TaskToolInputWithSchema"),
    "subagents._truncation": ("RetryTruncated",),
}.items() for name in names}

__all__ = sorted(_WHERE)

__getattr__ = lazy_exports(__name__, _WHERE)
