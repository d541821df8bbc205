"""AgentMiddleware classes that give an agent governed subagents.

Each idea is one module: :mod:`~middleware.subagents` (the ``task`` tool's
middleware), :mod:`~middleware.task_tool` (what the model sees),
:mod:`~middleware.task_tool` (the parent state and the write-back),
:mod:`~middleware.background`, :mod:`~middleware.limits`, :mod:`~middleware.dynamic`::

    from middleware import SubAgentMiddleware

    agent = create_agent(model, middleware=[SubAgentMiddleware(subagents=[researcher])])
"""

from middleware.background import AsyncTaskLedgerState, BackgroundSubagentMiddleware
from middleware.child_answer import ReturnChildAnswer
from middleware.compat import AsyncSubAgentMiddleware, AsyncSubAgentState
from middleware.dynamic import DynamicSubagentState
from middleware.forced_tool_use import ForceToolUse
from middleware.limits import DelegationLimit, ForceDelegation, ForceSetting
from middleware.subagents import SubAgentMiddleware
from middleware.task_tool import (
    ASYNC_LEDGER_KEY,
    LEDGER_KEY,
    TASK_TOOL_NAME,
    SubagentLedgerState,
    TaskToolInput,
    TaskToolInputWithSchema,
)
from subagents.settings import DEFAULT_MAX_DELEGATIONS

__all__ = [
    "ASYNC_LEDGER_KEY",
    "AsyncSubAgentMiddleware",
    "AsyncSubAgentState",
    "AsyncTaskLedgerState",
    "BackgroundSubagentMiddleware",
    "DEFAULT_MAX_DELEGATIONS",
    "DelegationLimit",
    "DynamicSubagentState",
    "ForceDelegation",
    "ForceSetting",
    "ForceToolUse",
    "LEDGER_KEY",
    "ReturnChildAnswer",
    "SubAgentMiddleware",
    "SubagentLedgerState",
    "TASK_TOOL_NAME",
    "TaskToolInput",
    "TaskToolInputWithSchema",
]
