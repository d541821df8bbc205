"""AgentMiddleware classes that give an agent governed subagents."""

from middleware.background_middleware import AsyncTaskLedgerState, BackgroundSubagentMiddleware
from middleware.dynamic_subagents import DynamicSubagentState
from middleware.subagent_middleware import SubAgentMiddleware, SubagentLedgerState
from middleware.task_tool import TaskToolInput
from middleware.task_tool_schema import TaskToolInputWithSchema

__all__ = [
    "AsyncTaskLedgerState",
    "BackgroundSubagentMiddleware",
    "DynamicSubagentState",
    "SubAgentMiddleware",
    "SubagentLedgerState",
    "TaskToolInput",
    "TaskToolInputWithSchema",
]
