"""AgentMiddleware classes that give an agent governed subagents."""

from middleware.subagent_middleware import SubAgentMiddleware, SubagentLedgerState
from middleware.task_tool import TaskToolInput

__all__ = [
    "SubAgentMiddleware",
    "SubagentLedgerState",
    "TaskToolInput",
]
