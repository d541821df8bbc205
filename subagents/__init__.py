"""Everything about one subagent: its spec, the registry, building, isolating, running, recording."""

from subagents.agent_file import FIELD_SPELLINGS, load_agent_file, parse_agent_file
from subagents.background_ledger import AsyncTaskRecord, AsyncTaskStatus, merge_async_records
from subagents.background_local import wait_for_background
from subagents.background_loop import BackgroundLoop, background_loop
from subagents.background_remote import RemoteSubagentSpec
from subagents.background_tasks import BackgroundTasks, TaskStateError
from subagents.build_options import BuildOptions, check_spec
from subagents.budget import Budget, BudgetExceeded, PriceTable, cost_of
from subagents.builder import build_subagent, child_system_prompt, resolve_tools
from subagents.condenser import CondenserSetting, normalize_condenser
from subagents.discovery import (
    AGENT_DIRS,
    Definition,
    DirLevels,
    Discovery,
    FileProblem,
    discover_agents,
    load_agent_dir,
    load_agent_dirs,
)
from subagents.errors import (
    AgentFileError,
    DefinitionFileError,
    DefinitionFileWarning,
    SkillFileError,
    SpecError,
    StopReason,
    SubagentError,
)
from subagents.isolation import private_state_keys
from subagents.mcp_config import normalize_mcp_config
from subagents.meter import TaskMeter, TaskStopped
from subagents.models import ModelProfiles, UnknownModelPolicy, describe_model, resolve_model
from subagents.one_level import FORBIDDEN_TOOL_NAMES, OneLevelGuard
from subagents.permissions import (
    CLAUDE_PERMISSION_MODES,
    PERMISSION_MODES,
    PermissionMode,
    normalize_permission_mode,
)
from subagents.failures import describe_failure
from subagents.outcome import (
    CONTINUATION_PROMPT,
    DEFAULT_SHORT_ANSWER_THRESHOLD,
    TaskCall,
    TaskOutcome,
    TaskRecord,
    TaskStatus,
    add_usage,
    final_answer,
    merge_records,
)
from subagents.registry import SubagentRegistry, UnknownSubagent
from subagents.runner import TaskRunner
from subagents.transcript import get_transcript, jsonl_path, read_jsonl, read_transcript
from subagents.skills import (
    SKILL_DIRS,
    Skill,
    SkillCatalog,
    available_skills_block,
    discover_skills,
    load_skill,
    load_skill_dirs,
)
from subagents.spec import (
    DEFAULT_MAX_TURNS,
    AnySpec,
    CompiledSubagent,
    SubagentSpec,
    coerce_spec,
    coerce_specs,
)

__all__ = [
    "AsyncTaskRecord",
    "AsyncTaskStatus",
    "BackgroundLoop",
    "BackgroundTasks",
    "RemoteSubagentSpec",
    "TaskStateError",
    "background_loop",
    "wait_for_background",
    "merge_async_records",
    "CONTINUATION_PROMPT",
    "DEFAULT_SHORT_ANSWER_THRESHOLD",
    "Budget",
    "BudgetExceeded",
    "PriceTable",
    "add_usage",
    "cost_of",
    "describe_failure",
    "get_transcript",
    "jsonl_path",
    "read_jsonl",
    "read_transcript",
    "AGENT_DIRS",
    "CLAUDE_PERMISSION_MODES",
    "DEFAULT_MAX_TURNS",
    "FIELD_SPELLINGS",
    "FORBIDDEN_TOOL_NAMES",
    "PERMISSION_MODES",
    "SKILL_DIRS",
    "AgentFileError",
    "AnySpec",
    "BuildOptions",
    "CompiledSubagent",
    "CondenserSetting",
    "Definition",
    "DirLevels",
    "DefinitionFileError",
    "DefinitionFileWarning",
    "Discovery",
    "FileProblem",
    "ModelProfiles",
    "OneLevelGuard",
    "PermissionMode",
    "Skill",
    "SkillCatalog",
    "SkillFileError",
    "SpecError",
    "SubagentRegistry",
    "SubagentSpec",
    "TaskCall",
    "TaskOutcome",
    "StopReason",
    "SubagentError",
    "TaskMeter",
    "TaskRecord",
    "TaskRunner",
    "TaskStatus",
    "TaskStopped",
    "UnknownModelPolicy",
    "UnknownSubagent",
    "available_skills_block",
    "build_subagent",
    "check_spec",
    "child_system_prompt",
    "coerce_spec",
    "coerce_specs",
    "describe_model",
    "discover_agents",
    "discover_skills",
    "final_answer",
    "load_agent_dir",
    "load_agent_dirs",
    "load_agent_file",
    "load_skill",
    "load_skill_dirs",
    "merge_records",
    "normalize_condenser",
    "normalize_mcp_config",
    "normalize_permission_mode",
    "parse_agent_file",
    "private_state_keys",
    "resolve_model",
    "resolve_tools",
]
