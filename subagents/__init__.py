"""Everything about one subagent: its spec, the registry, building, isolating, running, recording.

The delegation core lives here (private ``_name`` modules, one step each);
definitions (agent files, skills, MCP, hooks, models, permissions) are in
:mod:`subagents.definitions`, background tasks in :mod:`subagents.background`::

    from subagents import SubagentRegistry, SubagentSpec, TaskRunner

    spec = SubagentSpec(name="researcher", description="Finds facts.", system_prompt="...", model=model)
    runner = TaskRunner(SubagentRegistry([spec]))
    outcome = runner.run(call)  # a TaskCall, as SubAgentMiddleware's `task` tool builds it
"""

# Definitions load first: their modules build on `_spec`, whose fields use their normalizers.
import subagents.definitions  # noqa: F401
from subagents._budget import Budget, BudgetExceeded, PriceTable, cost_of
from subagents._budget import token_count as token_count
from subagents._build_options import BuildOptions, check_spec
from subagents._builder import build_subagent

# What the middleware and the factory above wire in: importable from here (an
# explicit re-export, `name as name`) so no layer above reaches into a private
# module, but not part of the user's API.
from subagents._call_schema import SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY as SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY
from subagents._call_schema import OutputSchemaError, OutputSchemaViolation
from subagents._call_setup import inheritable_tool_names as inheritable_tool_names
from subagents._child_state import parent_state_schemas as parent_state_schemas
from subagents._dynamic import (
    DEFAULT_MAX_DYNAMIC_SUBAGENTS as DEFAULT_MAX_DYNAMIC_SUBAGENTS,
)
from subagents._dynamic import (
    DYNAMIC_SUBAGENTS_KEY as DYNAMIC_SUBAGENTS_KEY,
)
from subagents._dynamic import (
    DynamicDefinition as DynamicDefinition,
)
from subagents._dynamic import DynamicSubagentError
from subagents._dynamic import (
    check_definition as check_definition,
)
from subagents._dynamic import (
    merge_definitions as merge_definitions,
)
from subagents._errors import AgentFileError, SpecError, StopReason, SubagentError
from subagents._errors import brief as brief
from subagents._errors import is_real_cancellation as is_real_cancellation
from subagents._errors import safe_text as safe_text
from subagents._fork import ContextMode
from subagents._isolation import private_state_keys as private_state_keys
from subagents._ledger_channel import LedgerChannel as LedgerChannel
from subagents._ledger_channel import ledger_from_checkpoint as ledger_from_checkpoint
from subagents._one_level import DELEGATION_TOOL_TAG as DELEGATION_TOOL_TAG
from subagents._one_level import tool_name as tool_name
from subagents._outcome import (
    CONTINUATION_PROMPT as CONTINUATION_PROMPT,
)
from subagents._outcome import (
    DEFAULT_SHORT_ANSWER_THRESHOLD as DEFAULT_SHORT_ANSWER_THRESHOLD,
)
from subagents._outcome import TaskCall, TaskOutcome, TaskRecord, TaskStatus
from subagents._outcome import (
    add_usage as add_usage,
)
from subagents._outcome import (
    merge_records as merge_records,
)
from subagents._outcome import (
    task_id_for as task_id_for,
)
from subagents._registry import SubagentRegistry, UnknownSubagent
from subagents._runner import TASK_ID_METADATA_KEY as TASK_ID_METADATA_KEY
from subagents._runner import TaskRunner
from subagents._spec import DEFAULT_MAX_TURNS, AnySpec, CompiledSubagent, SubagentSpec, coerce_spec, coerce_specs
from subagents._spec import (
    CompiledSubAgent as CompiledSubAgent,
)
from subagents._spec import (
    describe_validation_error as describe_validation_error,
)
from subagents._spec_dicts import (
    AsyncSubAgent as AsyncSubAgent,
)
from subagents._spec_dicts import (
    SubAgent as SubAgent,
)
from subagents._spec_dicts import (
    is_async_spec as is_async_spec,
)
from subagents._transcript import NO_TRANSCRIPT as NO_TRANSCRIPT
from subagents._transcript import get_transcript, read_transcript
from subagents._writeback import parent_channels as parent_channels
from subagents._writeback import write_back as write_back
from subagents.background import BackgroundRuntime, BackgroundTasks, RemoteSubagentSpec, wait_for_background
from subagents.definitions import discover_agents, load_agent_dirs, load_agent_file

__all__ = [
    "DEFAULT_MAX_TURNS",
    "AgentFileError",
    "AnySpec",
    "BackgroundRuntime",
    "BackgroundTasks",
    "Budget",
    "BudgetExceeded",
    "BuildOptions",
    "CompiledSubagent",
    "ContextMode",
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
