"""Everything about one subagent: its spec, the registry, building, isolating, running, recording.

The public names are ``__all__`` (the modules behind them are internal); definitions (agent files, skills, MCP,
hooks, models, permissions) are in :mod:`subagents.definitions`, background tasks in :mod:`subagents.background`.
Names are imported on first use (PEP 562): ``import subagents._errors`` (the CLI's ``--help``) loads no LangChain.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from subagents._exports import lazy_exports

if TYPE_CHECKING:
    from subagents._boundary import ContextMode as ContextMode
    from subagents._builder import SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY as SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY
    from subagents._builder import BuildOptions as BuildOptions
    from subagents._builder import build_subagent as build_subagent
    from subagents._builder import check_spec as check_spec
    from subagents._errors import AgentFileError as AgentFileError
    from subagents._errors import BudgetExceeded as BudgetExceeded
    from subagents._errors import DynamicSubagentError as DynamicSubagentError
    from subagents._errors import InvalidArgument as InvalidArgument
    from subagents._errors import InvalidArgumentType as InvalidArgumentType
    from subagents._errors import OutputSchemaError as OutputSchemaError
    from subagents._errors import OutputSchemaViolation as OutputSchemaViolation
    from subagents._errors import ParentPolicyNotInherited as ParentPolicyNotInherited
    from subagents._errors import RemoteAnswerError as RemoteAnswerError
    from subagents._errors import SpecError as SpecError
    from subagents._errors import StopReason as StopReason
    from subagents._errors import StoredDataError as StoredDataError
    from subagents._errors import SubagentError as SubagentError
    from subagents._errors import SubagentsError as SubagentsError
    from subagents._errors import SubagentsWarning as SubagentsWarning
    from subagents._errors import ToolCallsUnsupported as ToolCallsUnsupported
    from subagents._errors import TranscriptUnavailable as TranscriptUnavailable
    from subagents._errors import UnknownSubagent as UnknownSubagent
    from subagents._errors import UnknownTask as UnknownTask
    from subagents._errors import UnsupportedCall as UnsupportedCall
    from subagents._ledger import DataOnlySerializer as DataOnlySerializer
    from subagents._ledger import LedgerChannel as LedgerChannel
    from subagents._ledger import saved_value as saved_value
    from subagents._metering import Budget as Budget
    from subagents._metering import PriceTable as PriceTable
    from subagents._metering import cost_of as cost_of
    from subagents._outcome import TaskCall as TaskCall
    from subagents._outcome import TaskOutcome as TaskOutcome
    from subagents._outcome import TaskRecord as TaskRecord
    from subagents._outcome import TaskStatus as TaskStatus
    from subagents._registry import SubagentRegistry as SubagentRegistry
    from subagents._roles import ChildPolicy as ChildPolicy
    from subagents._runner import TaskRunner as TaskRunner
    from subagents._settings import BackgroundSettings as BackgroundSettings
    from subagents._settings import Definitions as Definitions
    from subagents._settings import DelegationSettings as DelegationSettings
    from subagents._settings import Limits as Limits
    from subagents._settings import Observability as Observability
    from subagents._settings import RootGraph as RootGraph
    from subagents._spec import DEFAULT_MAX_TURNS as DEFAULT_MAX_TURNS
    from subagents._spec import AnySpec as AnySpec
    from subagents._spec import CompiledSubagent as CompiledSubagent
    from subagents._spec import SubagentSpec as SubagentSpec
    from subagents._spec import coerce_spec as coerce_spec
    from subagents._spec import coerce_specs as coerce_specs
    from subagents._transcripts import get_transcript as get_transcript
    from subagents._transcripts import read_transcript as read_transcript
    from subagents.background import BackgroundRuntime as BackgroundRuntime
    from subagents.background import BackgroundTasks as BackgroundTasks
    from subagents.background import RemoteSubagentSpec as RemoteSubagentSpec
    from subagents.background import wait_for_background as wait_for_background
    from subagents.definitions._agent_files import discover_agents as discover_agents
    from subagents.definitions._agent_files import load_agent_dirs as load_agent_dirs
    from subagents.definitions._agent_files import load_agent_file as load_agent_file

__getattr__ = lazy_exports(__name__)  # and __all__: the names re-exported above
