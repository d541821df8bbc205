"""Everything about one subagent: its spec, the registry, building, isolating, running, recording."""

from subagents.builder import build_subagent, resolve_model, resolve_tools
from subagents.isolation import EXCLUDED_KEYS, LEDGER_KEY, private_state_keys
from subagents.meter import TaskMeter, TaskStopped
from subagents.one_level import FORBIDDEN_TOOL_NAMES, OneLevelGuard
from subagents.record import TaskRecord, TaskStatus, merge_records
from subagents.registry import SubagentRegistry, UnknownSubagent
from subagents.runner import TaskCall, TaskRunner, final_answer
from subagents.spec import (
    DEFAULT_MAX_TURNS,
    AnySpec,
    CompiledSubagent,
    SpecError,
    SubagentSpec,
    coerce_spec,
    coerce_specs,
)

__all__ = [
    "DEFAULT_MAX_TURNS",
    "EXCLUDED_KEYS",
    "FORBIDDEN_TOOL_NAMES",
    "LEDGER_KEY",
    "AnySpec",
    "CompiledSubagent",
    "OneLevelGuard",
    "SpecError",
    "SubagentRegistry",
    "SubagentSpec",
    "TaskCall",
    "TaskMeter",
    "TaskRecord",
    "TaskRunner",
    "TaskStatus",
    "TaskStopped",
    "UnknownSubagent",
    "build_subagent",
    "coerce_spec",
    "coerce_specs",
    "final_answer",
    "merge_records",
    "private_state_keys",
    "resolve_model",
    "resolve_tools",
]
