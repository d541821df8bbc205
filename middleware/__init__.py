"""AgentMiddleware classes that give an agent governed subagents."""

from middleware.background_middleware import AsyncTaskLedgerState, BackgroundSubagentMiddleware
from middleware.delegation_limit import DEFAULT_MAX_DELEGATIONS, DelegationLimit
from middleware.dynamic_subagents import DynamicSubagentState
from middleware.force_delegation import ForceDelegation
from middleware.subagent_middleware import SubagentLedgerState, SubAgentMiddleware
from middleware.task_tool import TaskToolInput
from middleware.task_tool_schema import TaskToolInputWithSchema

__all__ = [
    "DEFAULT_MAX_DELEGATIONS",
    "AsyncTaskLedgerState",
    "BackgroundSubagentMiddleware",
    "DynamicSubagentState",
    "DelegationLimit",
    "ForceDelegation",
    "SubAgentMiddleware",
    "SubagentLedgerState",
    "TaskToolInput",
    "TaskToolInputWithSchema",
]
