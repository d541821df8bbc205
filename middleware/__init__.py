"""AgentMiddleware classes that give an agent governed subagents."""

from middleware.background_middleware import AsyncTaskLedgerState, BackgroundSubagentMiddleware
from middleware.delegation_limit import DEFAULT_MAX_DELEGATIONS, DelegationLimit
from middleware.force_delegation import ForceDelegation
from middleware.subagent_middleware import SubAgentMiddleware, SubagentLedgerState
from middleware.task_tool import TaskToolInput

__all__ = [
    "DEFAULT_MAX_DELEGATIONS",
    "AsyncTaskLedgerState",
    "BackgroundSubagentMiddleware",
    "DelegationLimit",
    "ForceDelegation",
    "SubAgentMiddleware",
    "SubagentLedgerState",
    "TaskToolInput",
]
