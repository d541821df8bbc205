"""Everything about one subagent: its spec, the registry, building, isolating, running, recording.

Each idea is one public module: :mod:`~subagents.spec`, :mod:`~subagents.registry`,
:mod:`~subagents.builder`, :mod:`~subagents.boundary`, :mod:`~subagents.runner`,
:mod:`~subagents.metering`, :mod:`~subagents.transcripts`, :mod:`~subagents.outcome`,
:mod:`~subagents.ledger`, :mod:`~subagents.errors`, :mod:`~subagents.settings`;
definitions (agent files, skills, MCP, hooks, models, permissions) are in
:mod:`subagents.definitions`, background tasks in :mod:`subagents.background`::

    from subagents import SubagentRegistry, SubagentSpec, TaskRunner

    spec = SubagentSpec(name="researcher", description="Finds facts.", system_prompt="...", model=model)
    runner = TaskRunner(SubagentRegistry([spec]))
    outcome = runner.run(call)  # a TaskCall, as SubAgentMiddleware's `task` tool builds it
"""

from subagents.background import BackgroundRuntime, BackgroundTasks, RemoteSubagentSpec, wait_for_background
from subagents.builder import BuildOptions, OutputSchemaError, OutputSchemaViolation, build_subagent, check_spec
from subagents.definitions.agent_files import discover_agents, load_agent_dirs, load_agent_file
from subagents.errors import AgentFileError, SpecError, StopReason, SubagentError
from subagents.metering import Budget, BudgetExceeded, PriceTable, cost_of
from subagents.outcome import TaskCall, TaskOutcome, TaskRecord, TaskStatus
from subagents.registry import DynamicSubagentError, SubagentRegistry, UnknownSubagent
from subagents.runner import TaskRunner
from subagents.spec import (
    DEFAULT_MAX_TURNS,
    AnySpec,
    CompiledSubagent,
    ContextMode,
    SubagentSpec,
    coerce_spec,
    coerce_specs,
)
from subagents.transcripts import get_transcript, read_transcript

__all__ = [
    "AgentFileError",
    "AnySpec",
    "BackgroundRuntime",
    "BackgroundTasks",
    "Budget",
    "BudgetExceeded",
    "BuildOptions",
    "CompiledSubagent",
    "ContextMode",
    "DEFAULT_MAX_TURNS",
    "DynamicSubagentError",
    "OutputSchemaError",
    "OutputSchemaViolation",
    "PriceTable",
    "RemoteSubagentSpec",
    "SpecError",
    "StopReason",
    "SubagentError",
    "SubagentRegistry",
    "SubagentSpec",
    "TaskCall",
    "TaskOutcome",
    "TaskRecord",
    "TaskRunner",
    "TaskStatus",
    "UnknownSubagent",
    "build_subagent",
    "check_spec",
    "coerce_spec",
    "coerce_specs",
    "cost_of",
    "discover_agents",
    "get_transcript",
    "load_agent_dirs",
    "load_agent_file",
    "read_transcript",
    "wait_for_background",
]
