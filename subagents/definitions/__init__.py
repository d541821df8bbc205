"""Subagent definitions: agent files, frontmatter, discovery, skills, MCP, hooks, models, permissions.

Everything a definition can say, read from markdown files or given as fields,
and checked when it is loaded::

    from subagents.definitions import discover_agents

    found = discover_agents()  # .agents/agents and .claude/agents, project then user
    specs = [definition.value for definition in found.definitions]
"""

from subagents._errors import AgentFileError, DefinitionFileError, DefinitionFileWarning, SkillFileError
from subagents.definitions._agent_file import FIELD_SPELLINGS, load_agent_file, parse_agent_file
from subagents.definitions._condenser import CondenserSetting, describe_condenser, normalize_condenser
from subagents.definitions._discovery import (
    AGENT_DIRS,
    Definition,
    DirLevels,
    Discovery,
    FileProblem,
    default_levels,
    discover_agents,
    load_agent_dir,
    load_agent_dirs,
)
from subagents.definitions._hook_config import normalize_hooks
from subagents.definitions._hook_middleware import HookMiddleware
from subagents.definitions._mcp_config import check_mcp_servers, normalize_mcp_config
from subagents.definitions._mcp_sessions import McpServerError
from subagents.definitions._mcp_tools import McpTool, McpToolset, mcp_tool_name
from subagents.definitions._migration import deepagents_only, refuse_deepagents_arguments
from subagents.definitions._models import ModelProfiles, UnknownModelPolicy, describe_model, resolve_model
from subagents.definitions._permissions import (
    CLAUDE_PERMISSION_MODES,
    PERMISSION_MODES,
    PermissionMode,
    approval_rules,
    normalize_permission_mode,
)
from subagents.definitions._skills import (
    SKILL_DIRS,
    Skill,
    SkillCatalog,
    available_skills_block,
    discover_skills,
    load_skill,
    load_skill_dirs,
)

__all__ = [
    "AGENT_DIRS",
    "CLAUDE_PERMISSION_MODES",
    "FIELD_SPELLINGS",
    "PERMISSION_MODES",
    "SKILL_DIRS",
    "AgentFileError",
    "CondenserSetting",
    "Definition",
    "DefinitionFileError",
    "DefinitionFileWarning",
    "DirLevels",
    "Discovery",
    "FileProblem",
    "HookMiddleware",
    "McpServerError",
    "McpTool",
    "McpToolset",
    "ModelProfiles",
    "PermissionMode",
    "Skill",
    "SkillCatalog",
    "SkillFileError",
    "UnknownModelPolicy",
    "approval_rules",
    "available_skills_block",
    "check_mcp_servers",
    "deepagents_only",
    "default_levels",
    "describe_condenser",
    "describe_model",
    "discover_agents",
    "discover_skills",
    "load_agent_dir",
    "load_agent_dirs",
    "load_agent_file",
    "load_skill",
    "load_skill_dirs",
    "mcp_tool_name",
    "normalize_condenser",
    "normalize_hooks",
    "normalize_mcp_config",
    "normalize_permission_mode",
    "parse_agent_file",
    "refuse_deepagents_arguments",
    "resolve_model",
]
