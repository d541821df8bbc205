"""Subagent definitions: what a definition can say, and the machinery behind each field.

Reading agent files from disk is :mod:`subagents.definitions.agent_files` (it
builds :class:`~subagents.SubagentSpec` objects, so it sits above the spec);
this package's other modules are the fields a spec holds and what runs them:
skills, MCP servers, hooks, models, permissions, the condenser::

    from subagents.definitions.agent_files import discover_agents
    found = discover_agents()  # .agents/agents and .claude/agents, project then user
    specs = [definition.value for definition in found.definitions]
"""

from subagents.definitions.condenser import CondenserSetting, describe_condenser, normalize_condenser
from subagents.definitions.files import Definition, DirLevels, Discovery, FileProblem, default_levels
from subagents.definitions.hooks import HookMiddleware, normalize_hooks
from subagents.definitions.mcp import McpTool, McpToolset, check_mcp_servers, mcp_tool_name, normalize_mcp_config
from subagents.definitions.models import ModelProfiles, UnknownModelPolicy, describe_model, resolve_model
from subagents.definitions.permissions import (
    CLAUDE_PERMISSION_MODES,
    PERMISSION_MODES,
    PermissionMode,
    approval_rules,
    normalize_permission_mode,
)
from subagents.definitions.skills import (
    SKILL_DIRS,
    Skill,
    SkillCatalog,
    available_skills_block,
    discover_skills,
    load_skill,
    load_skill_dirs,
)
from subagents.errors import McpServerError

__all__ = [
    "CLAUDE_PERMISSION_MODES",
    "CondenserSetting",
    "Definition",
    "DirLevels",
    "Discovery",
    "FileProblem",
    "HookMiddleware",
    "McpServerError",
    "McpTool",
    "McpToolset",
    "ModelProfiles",
    "PERMISSION_MODES",
    "PermissionMode",
    "SKILL_DIRS",
    "Skill",
    "SkillCatalog",
    "UnknownModelPolicy",
    "approval_rules",
    "available_skills_block",
    "check_mcp_servers",
    "default_levels",
    "describe_condenser",
    "describe_model",
    "discover_skills",
    "load_skill",
    "load_skill_dirs",
    "mcp_tool_name",
    "normalize_condenser",
    "normalize_hooks",
    "normalize_mcp_config",
    "normalize_permission_mode",
    "resolve_model",
]
