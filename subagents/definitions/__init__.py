"""Subagent definitions: the fields a spec holds and what runs them (skills, MCP servers, hooks, models,
permissions, the condenser); :mod:`subagents.definitions._agent_files` reads agent files. Names are imported on
first use (PEP 562): a spec without MCP servers or hooks never loads their clients."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subagents._exports import lazy_exports

if TYPE_CHECKING:
    from subagents._errors import McpServerError as McpServerError
    from subagents.definitions._condenser import CondenserSetting as CondenserSetting
    from subagents.definitions._condenser import describe_condenser as describe_condenser
    from subagents.definitions._condenser import normalize_condenser as normalize_condenser
    from subagents.definitions._files import Definition as Definition
    from subagents.definitions._files import DirLevels as DirLevels
    from subagents.definitions._files import Discovery as Discovery
    from subagents.definitions._files import FileProblem as FileProblem
    from subagents.definitions._files import default_levels as default_levels
    from subagents.definitions._hooks import HookMiddleware as HookMiddleware
    from subagents.definitions._hooks import normalize_hooks as normalize_hooks
    from subagents.definitions._mcp import McpTool as McpTool
    from subagents.definitions._mcp import McpToolset as McpToolset
    from subagents.definitions._mcp import check_mcp_servers as check_mcp_servers
    from subagents.definitions._mcp import mcp_tool_name as mcp_tool_name
    from subagents.definitions._mcp import normalize_mcp_config as normalize_mcp_config
    from subagents.definitions._models import ModelProfiles as ModelProfiles
    from subagents.definitions._models import UnknownModelPolicy as UnknownModelPolicy
    from subagents.definitions._models import describe_model as describe_model
    from subagents.definitions._models import resolve_model as resolve_model
    from subagents.definitions._permissions import CLAUDE_PERMISSION_MODES as CLAUDE_PERMISSION_MODES
    from subagents.definitions._permissions import PERMISSION_MODES as PERMISSION_MODES
    from subagents.definitions._permissions import PermissionMode as PermissionMode
    from subagents.definitions._permissions import approval_rules as approval_rules
    from subagents.definitions._permissions import normalize_permission_mode as normalize_permission_mode
    from subagents.definitions._skills import SKILL_DIRS as SKILL_DIRS
    from subagents.definitions._skills import Skill as Skill
    from subagents.definitions._skills import SkillCatalog as SkillCatalog
    from subagents.definitions._skills import available_skills_block as available_skills_block
    from subagents.definitions._skills import discover_skills as discover_skills
    from subagents.definitions._skills import load_skill as load_skill
    from subagents.definitions._skills import load_skill_dirs as load_skill_dirs

__getattr__ = lazy_exports(__name__)  # and __all__: the names re-exported above
