"""AgentMiddleware classes that give an agent governed subagents.

Internal modules are private (``_name``); this is the public API::

    from middleware import SubAgentMiddleware

    agent = create_agent(model, middleware=[SubAgentMiddleware(subagents=[researcher])])
"""

from middleware._background_middleware import AsyncTaskLedgerState, BackgroundSubagentMiddleware
from middleware._delegation_limit import DEFAULT_MAX_DELEGATIONS, DelegationLimit
from middleware._dynamic_subagents import DynamicSubagentState
from middleware._force_delegation import ForceDelegation, ForceSetting
from middleware._ledger import ASYNC_LEDGER_KEY, LEDGER_KEY, TASK_TOOL_NAME
from middleware._ledger import check_ledger_fields as check_ledger_fields
from middleware._subagent_middleware import SubagentLedgerState, SubAgentMiddleware
from middleware._task_tool import TaskToolInput
from middleware._task_tool_schema import TaskToolInputWithSchema

__all__ = [
    "ASYNC_LEDGER_KEY",
    "DEFAULT_MAX_DELEGATIONS",
    "LEDGER_KEY",
    "TASK_TOOL_NAME",
    "AsyncTaskLedgerState",
    "BackgroundSubagentMiddleware",
    "DelegationLimit",
    "DynamicSubagentState",
    "ForceDelegation",
    "ForceSetting",
    "SubAgentMiddleware",
    "SubagentLedgerState",
    "TaskToolInput",
    "TaskToolInputWithSchema",
]
