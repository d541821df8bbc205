"""AgentMiddleware classes that give an agent governed subagents."""

from middleware.background_middleware import AsyncTaskLedgerState, BackgroundSubagentMiddleware
from middleware.subagent_middleware import SubAgentMiddleware, SubagentLedgerState
from middleware.task_tool import TaskToolInput

__all__ = [
    "AsyncTaskLedgerState",
    "BackgroundSubagentMiddleware",
    "SubAgentMiddleware",
    "SubagentLedgerState",
    "TaskToolInput",
]
