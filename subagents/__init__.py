"""Everything about one subagent: its spec, the registry, building, isolating, running, recording.

The public names are ``__all__`` (the modules behind them are internal); definitions (agent files, skills, MCP,
hooks, models, permissions) are in :mod:`subagents.definitions`, background tasks in :mod:`subagents.background`.
Names are imported on first use (PEP 562): ``import subagents.errors`` (the CLI's ``--help``) loads no LangChain.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from subagents.exports import lazy_exports

if TYPE_CHECKING:
    from subagents.background import BackgroundRuntime as BackgroundRuntime
    from subagents.background import BackgroundTasks as BackgroundTasks
    from subagents.background import RemoteSubagentSpec as RemoteSubagentSpec
    from subagents.background import wait_for_background as wait_for_background
    from subagents.boundary import ContextMode as ContextMode
    from subagents.builder import SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY as SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY
    from subagents.builder import BuildOptions as BuildOptions
    from subagents.builder import build_subagent as build_subagent
    from subagents.builder import check_spec as check_spec
    from subagents.definitions.agent_files import discover_agents as discover_agents
    from subagents.definitions.agent_files import load_agent_dirs as load_agent_dirs
    from subagents.definitions.agent_files import load_agent_file as load_agent_file
    from subagents.errors import AgentFileError as AgentFileError
    from subagents.errors import BudgetExceeded as BudgetExceeded
    from subagents.errors import DynamicSubagentError as DynamicSubagentError
    from subagents.errors import InvalidArgument as InvalidArgument
    from subagents.errors import InvalidArgumentType as InvalidArgumentType
    from subagents.errors import OutputSchemaError as OutputSchemaError
    from subagents.errors import OutputSchemaViolation as OutputSchemaViolation
    from subagents.errors import ParentPolicyNotInherited as ParentPolicyNotInherited
    from subagents.errors import RemoteAnswerError as RemoteAnswerError
    from subagents.errors import SpecError as SpecError
    from subagents.errors import StopReason as StopReason
    from subagents.errors import StoredDataError as StoredDataError
    from subagents.errors import SubagentError as SubagentError
    from subagents.errors import SubagentsError as SubagentsError
    from subagents.errors import SubagentsWarning as SubagentsWarning
    from subagents.errors import ToolCallsUnsupported as ToolCallsUnsupported
    from subagents.errors import TranscriptUnavailable as TranscriptUnavailable
    from subagents.errors import UnknownSubagent as UnknownSubagent
    from subagents.errors import UnknownTask as UnknownTask
    from subagents.errors import UnsupportedCall as UnsupportedCall
    from subagents.ledger import DataOnlySerializer as DataOnlySerializer
    from subagents.ledger import LedgerChannel as LedgerChannel
    from subagents.ledger import saved_value as saved_value
    from subagents.metering import Budget as Budget
    from subagents.metering import PriceTable as PriceTable
    from subagents.metering import cost_of as cost_of
    from subagents.outcome import TaskCall as TaskCall
    from subagents.outcome import TaskOutcome as TaskOutcome
    from subagents.outcome import TaskRecord as TaskRecord
    from subagents.outcome import TaskStatus as TaskStatus
    from subagents.registry import SubagentRegistry as SubagentRegistry
    from subagents.roles import ChildPolicy as ChildPolicy
    from subagents.runner import TaskRunner as TaskRunner
    from subagents.settings import BackgroundSettings as BackgroundSettings
    from subagents.settings import Definitions as Definitions
    from subagents.settings import DelegationSettings as DelegationSettings
    from subagents.settings import Limits as Limits
    from subagents.settings import Observability as Observability
    from subagents.settings import RootGraph as RootGraph
    from subagents.spec import DEFAULT_MAX_TURNS as DEFAULT_MAX_TURNS
    from subagents.spec import AnySpec as AnySpec
    from subagents.spec import CompiledSubagent as CompiledSubagent
    from subagents.spec import SubagentSpec as SubagentSpec
    from subagents.spec import coerce_spec as coerce_spec
    from subagents.spec import coerce_specs as coerce_specs
    from subagents.transcripts import get_transcript as get_transcript
    from subagents.transcripts import read_transcript as read_transcript

__getattr__ = lazy_exports(__name__)  # and __all__: the names re-exported above
