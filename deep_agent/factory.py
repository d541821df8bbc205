"""``create_deep_agent``: a root agent that delegates through ``task``, from our arguments or deepagents'.

Its state is :class:`DeepAgentState`, whose conversation is checkpointed as
its changes (see the section on the root's state). deepagents' own
arguments (``backend=``, ``skills=``, ``memory=``, ``permissions=``,
``model=None``) compose deepagents' maintained middleware into the root's
stack (see the last section).

Example::

    from deep_agent import create_deep_agent

    agent = create_deep_agent(
        "openai:gpt-4.1-mini",
        tools=[search],
        subagents=[{"name": "researcher", "description": "Finds facts.",
                    "system_prompt": "Research and cite.", "tools": ["search"]}],
        system_prompt="You plan and delegate.",
    )
    agent.invoke({"messages": [{"role": "user", "content": "Compare A and B"}]})

Subagents can also be markdown agent files, with skills and model profiles::

    agent = create_deep_agent(
        "openai:gpt-4.1",
        tools=[read_file, write_file],
        agents_dirs=[".agents/agents", "~/.agents/agents"],   # first wins per name
        skills_dirs=[".agents/skills"],
        model_profiles={"sonnet": "anthropic:claude-sonnet-4-5", "haiku": "inherit"},
        permission_mode="confirm_risky",
        risky_tools={"write_file"},
    )
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired, Required, cast

from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, ModelCallLimitMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    RemoveMessage,
    SystemMessage,
    convert_to_messages,
    message_chunk_to_message,
)
from langgraph.cache.base import BaseCache
from langgraph.channels import DeltaChannel
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Checkpointer

from middleware.limits import ForceSetting
from middleware.root_turn_limit import DEFAULT_MAX_ROOT_TURNS, RootTurnLimit
from middleware.subagents import SubAgentMiddleware
from middleware.task_tool import LEDGER_KEY, TASK_TOOL_NAME, check_ledger_fields, with_text_appended
from subagents import AnySpec, Budget, BuildOptions, PriceTable, SpecError, coerce_spec, load_agent_dirs
from subagents.boundary import is_forbidden_tool, parent_state_schemas, private_state_keys, tool_name
from subagents.definitions.files import DirLevels
from subagents.definitions.models import ModelProfiles
from subagents.definitions.permissions import PermissionMode, approval_rules
from subagents.definitions.skills import SkillCatalog
from subagents.errors import SubagentsError
from subagents.ledger import LedgerChannel, merge_async_records, merge_records, saved_value
from subagents.metering import RunMeter
from subagents.outcome import DEFAULT_SHORT_ANSWER_THRESHOLD
from subagents.settings import DEFAULT_MAX_DELEGATIONS, DelegationSettings
from subagents.spec import is_async_spec

if TYPE_CHECKING:
    from subagents.definitions.hooks import HookMiddleware


def resolve_root_model(model: str | BaseChatModel | None) -> BaseChatModel:
    """A ``"provider:model"`` string through ``init_chat_model``, or the model itself.

    ``None`` is deepagents' deprecated default: its model, with a ``DeprecationWarning``.
    """
    if model is None:
        warnings.warn(MODEL_NONE_WARNING, DeprecationWarning, stacklevel=3)
        model = DEFAULT_MODEL
    if isinstance(model, str):
        from langchain.chat_models import init_chat_model

        return init_chat_model(model)
    if not isinstance(model, BaseChatModel):
        raise TypeError(
            f"model: expected a 'provider:model' string or a BaseChatModel, got {type(model).__name__}"
        )
    return model


def create_deep_agent(
    model: str | BaseChatModel | None = None,
    tools: Sequence[Any] | None = (),
    *,
    subagents: Sequence[AnySpec | Mapping[str, Any]] | None = (),
    agents_dirs: DirLevels | None = None,
    skills_dirs: DirLevels | None = None,
    model_profiles: ModelProfiles | None = None,
    unknown_model: Literal["error", "inherit"] = "error",
    permission_mode: PermissionMode | str | None = None,
    risky_tools: Iterable[str] = (),
    mcp_servers: Mapping[str, Mapping[str, Any]] | None = None,
    hooks: Mapping[str, Any] | None = None,
    system_prompt: str | SystemMessage | None = None,
    middleware: Sequence[Any] | None = (),
    general_purpose: bool = True,
    max_concurrent_tasks: int | None = None,
    unknown_tools: Literal["error", "warn", "ignore"] = "warn",
    sessions_dir: str | None = None,
    transcript_store: Any = None,
    prices: PriceTable | None = None,
    budget: Budget | None = None,
    short_answer_threshold: int = DEFAULT_SHORT_ANSWER_THRESHOLD,
    retry_truncated: bool | Literal["brief", "more_tokens"] = False,
    wrap_up: bool | float = True,
    force_delegation: ForceSetting = None,
    max_delegations: int | None = DEFAULT_MAX_DELEGATIONS,
    max_root_turns: int | None = DEFAULT_MAX_ROOT_TURNS,
    background: bool = False,
    background_subagents: Sequence[Any] = (),
    max_background_tasks: int | None = 8,
    dynamic_subagents: bool = False,
    max_dynamic_subagents: int = 8,
    structured_results: bool = False,
    name_enum: bool = False,
    background_runtime: Any = None,
    response_format: Any = None,
    interrupt_on: Mapping[str, Any] | None = None,
    checkpointer: Checkpointer | None = None,
    store: BaseStore | None = None,
    name: str | None = None,
    state_schema: type[AgentState[Any]] | None = None,
    context_schema: type[Any] | None = None,
    interrupt_before: list[str] | None = None,
    interrupt_after: list[str] | None = None,
    debug: bool = False,
    cache: BaseCache[Any] | None = None,
    backend: Any = None,
    memory: Sequence[str] | None = None,
    permissions: Sequence[Any] | None = None,
    skills: Sequence[str] | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build a compiled root agent whose subagents are reached through ``task``.

    Children inherit ``model`` and ``tools`` unless their spec says otherwise.
    Keys that ``middleware`` marks private never reach a child. ``state_schema``,
    ``context_schema``, ``interrupt_before``, ``interrupt_after``, ``debug``,
    ``cache``, ``checkpointer``, ``store`` and ``name`` go to
    :func:`langchain.agents.create_agent` as they are.

    Example::

        agent = create_deep_agent("openai:gpt-4.1-mini", [search], subagents=[
            {"name": "researcher", "description": "Finds facts.", "system_prompt": "Research and cite."},
        ])
        agent.invoke({"messages": [{"role": "user", "content": "What changed in LangGraph 1.2?"}]})

    Args:
        agents_dirs: agent-file directories, in precedence order (the first
            level to define a name wins; a nested list groups directories
            of one level). ``None`` reads no files.
        skills_dirs: skill directories, likewise. The root's prompt lists
            every skill found; a child's lists only those its spec names.
        model_profiles: profile name -> model, for specs' ``model`` names.
        unknown_model: ``"inherit"`` lets an unresolvable model name fall
            back to the parent's model instead of raising.
        permission_mode: the parent's approval policy: applied to the
            root's own ``tools`` and inherited by every child whose spec
            sets none. ``None``: no approval unless a spec asks.
        risky_tools: tool names that ``confirm_risky`` pauses on.
        mcp_servers: MCP servers (name -> ``{command, args, env}`` or
            ``{url, headers}``) that subagents may name in ``mcp_config``
            without defining them. The root itself never gets MCP tools.
        hooks: Claude Code hooks for the root (``PreToolUse``,
            ``PostToolUse``, ``Stop``, and ``SubagentStart``/``SubagentStop``
            around each ``task`` delegation); see :class:`subagents.definitions.HookMiddleware`.
        sessions_dir, transcript_store, prices, budget, short_answer_threshold, wrap_up:
            transcripts, usage and budgets, short-answer continuation, and a
            child's last call at a limit as a wrap-up with no tools;
            see :class:`middleware.SubAgentMiddleware`.
        retry_truncated: for every subagent whose spec sets none: a child's
            reply cut at the output token limit is asked for once more, with
            twice the tokens (``"more_tokens"``), a request to be brief
            (``"brief"``) or both (``True``); the record counts it in
            ``truncated_retries`` (and ``model_calls``). See
            :mod:`subagents.truncation`.
        background: also give the root the background-task tools
            (``start_async_task`` ...) over the same subagents, run in this
            process (see :class:`middleware.BackgroundSubagentMiddleware`).
        background_subagents: more subagents for background use only, such
            as remote ones (``{"name", "description", "graph_id", "url"}``);
            giving any turns ``background`` on.
        max_background_tasks: how many background tasks run at once.
        dynamic_subagents, max_dynamic_subagents, structured_results:
            delegation modes, each off by default: the ``create_subagent``
            tool, and a per-call ``output_schema`` on ``task``; see
            :class:`middleware.SubAgentMiddleware`.
        name_enum: also list the agent names as an ``enum`` in the ``task``
            tool's schema, for servers that constrain tool calls to their
            schema (off: the names are listed once, in ``<available_agents>``);
            see :class:`middleware.SubAgentMiddleware`.
        interrupt_on: tool name -> ``True`` or a ``HumanInTheLoopMiddleware``
            rule (``{"allowed_decisions": [...]}``), as in deepagents: applied
            to the root's tools and inherited by every declarative child
            whose spec sets no ``interrupt_on`` of its own; a floor for
            every child (a spec's own may add gates, never un-gate one).

    Specs with ``graph_id`` (deepagents' ``AsyncSubAgent``: ``name``,
    ``description``, ``graph_id``, ``url``, optional ``headers``) in
    ``subagents`` go to the background tools.

    deepagents' ``backend``, ``skills`` (backend paths), ``memory`` and
    ``permissions`` compose deepagents' own ``FilesystemMiddleware``,
    ``SkillsMiddleware`` and ``MemoryMiddleware`` at the front of the
    root's stack (``StateBackend`` when only the others are given); they
    need the ``deepagents`` extra (see the section on deepagents' arguments below).
    Children inherit the tools of the root's tool node, middleware-provided
    ones included, with the state keys those tools declare.
        force_delegation, max_delegations: the first model call of each
            turn must call ``task``; at most this many ``task`` calls per
            run. See :class:`middleware.SubAgentMiddleware`.
        max_root_turns: the root's own model calls allowed per run (default
            200; ``None``: no cap). Each ``invoke``, and each resume after an
            interrupt, counts from zero; children's calls and tool calls do not
            count. A model that keeps calling tools (``task`` past
            ``max_delegations``, say) is ended there with a final AI message
            naming the limit, rather than at LangGraph's recursion limit with
            an error. Checked inside the model call
            (:class:`middleware.root_turn_limit.RootTurnLimit`), so it adds no
            graph step and no checkpoint; LangChain's
            ``ModelCallLimitMiddleware`` of your own in ``middleware``
            replaces it (a bad value is refused all the same).
        background_runtime: the :class:`subagents.BackgroundRuntime` they run
            on (to share it, or to ``close()`` it); default: a new one.

    The limits, observability, background and definitions arguments are
    grouped once into a :class:`subagents.settings.DelegationSettings`, which
    the middlewares and runners below take whole.
    """
    # deepagents' defaults are None: accept them as "none".
    tools, subagents, middleware = tools or (), subagents or (), middleware or ()
    # deepagents' file tools, skills and memory: its own middleware, first in the stack as in deepagents.
    files = deepagents_root_middleware(backend=backend, skills=skills, memory=memory, permissions=permissions,
                                       existing=middleware)
    middleware = [*files, *middleware]
    backend = deepagents_backend(backend, skills=skills, memory=memory, permissions=permissions)
    root_model = resolve_root_model(model)
    settings = DelegationSettings.from_arguments("create_deep_agent", dict(
        agents_dirs=agents_dirs, skills_dirs=skills_dirs, model_profiles=model_profiles,
        unknown_model=unknown_model, permission_mode=permission_mode, risky_tools=risky_tools,
        mcp_servers=mcp_servers, interrupt_on=interrupt_on, unknown_tools=unknown_tools,
        general_purpose=general_purpose, max_concurrent_tasks=max_concurrent_tasks,
        max_delegations=max_delegations, max_dynamic_subagents=max_dynamic_subagents,
        short_answer_threshold=short_answer_threshold, retry_truncated=retry_truncated, budget=budget,
        wrap_up=wrap_up,
        sessions_dir=sessions_dir,
        transcript_store=transcript_store, prices=prices, background=background,
        background_subagents=[*background_subagents, *(s for s in subagents if is_async_spec(s))],
        max_background_tasks=max_background_tasks, background_runtime=background_runtime,
    ))
    tools = list(tools)
    check_ledger_fields(state_schema, "create_deep_agent: argument 'state_schema'")
    skill_catalog = settings.definitions.skills()
    options = settings.definitions.build_options(
        skill_catalog, parent_state_schemas(state_schema, middleware))
    declared = [s for s in subagents if not is_async_spec(s)]
    declared = backend_permissions_for_specs(backend_skills_for_specs(declared, backend=backend), backend=backend)
    specs = _with_agent_files(declared, settings.definitions.agents_dirs)
    specs = general_purpose_with_root_skills(specs, enabled=general_purpose, backend=backend, skills=skills)
    # The agent's own state_schema marks keys private as its middleware do (LangChain's PrivateStateAttr).
    private = private_state_keys([*middleware, *([state_schema] if state_schema is not None else [])])
    # tools=None: children inherit the root's tool node (its tools and its middleware's, such as file
    # tools), the same rule as SubAgentMiddleware in a plain create_agent.
    delegation = SubAgentMiddleware(
        specs, model=root_model, tools=None, model_middleware=middleware, private_state_keys=private,
        build_options=options, settings=settings,
        dynamic_subagents=dynamic_subagents, structured_results=structured_results, force_delegation=force_delegation,
        name_enum=name_enum,
    )
    extra: list[Any] = []
    root_hooks = _root_hooks(hooks)
    if settings.background.wanted:
        from middleware.background import BackgroundSubagentMiddleware

        tracked = BackgroundSubagentMiddleware(
            [*specs, *settings.background.subagents], model=root_model, tools=None, model_middleware=middleware,
            private_state_keys=private,
            build_options=options, settings=settings, listed_elsewhere=delegation.registry.names,
        )
        # Root SubagentStop hooks fire when a background child ends, as when a `task` returns.
        tracked.tasks.on_end.extend(h.background_task_ended for h in root_hooks)
        extra.append(tracked)
    stack = [*middleware, *_root_approval(options, tools, middleware), *root_hooks,
             *_root_turn_limit(max_root_turns, middleware, name), delegation, *extra]
    graph = create_agent(root_model, tools, system_prompt=_with_skills(system_prompt, skill_catalog),
                         middleware=stack, response_format=response_format,
                         state_schema=state_schema if state_schema is not None else DeepAgentState,
                         context_schema=context_schema, checkpointer=checkpointer, store=store,
                         interrupt_before=interrupt_before, interrupt_after=interrupt_after, debug=debug,
                         name=name, cache=cache)
    if budget is None:
        return graph
    # A root middleware's own model calls (a summariser's, a critic's) go around the root's model-call wrap:
    # the run's meter counts them, and only them, against the shared budget.
    return graph.with_config(callbacks=[RunMeter(budget, prices)])


def _root_turn_limit(max_root_turns: int | None, middleware: Sequence[Any], name: str | None) -> list[Any]:
    """The cap on the root's model calls per run, unless the caller set a model call limit of their own."""
    # Built first so a bad value is refused even when the caller's own limit replaces it.
    limit = RootTurnLimit(max_root_turns, name=name) if max_root_turns is not None else None
    if limit is None or any(isinstance(mw, ModelCallLimitMiddleware) for mw in middleware):
        return []  # two would count into the same state keys: the caller's decides
    return [limit]


# The tools besides `task` that start child work: a root `PreToolUse` matcher for `task` covers them.
_ALSO_DELEGATING = ("start_async_task", "retry_async_task", "create_subagent")


def _root_hooks(hooks: Mapping[str, Any] | None) -> list[HookMiddleware]:
    if not hooks:
        return []
    from subagents.definitions.hooks import HookMiddleware  # its subprocess runner: only for hooks

    try:
        return [HookMiddleware(hooks, scope="root", delegation=(TASK_TOOL_NAME, LEDGER_KEY),
                               also_delegating=_ALSO_DELEGATING)]
    except ValueError as exc:
        raise SpecError(f"hooks: {exc}") from None


def _with_agent_files(
    subagents: Sequence[AnySpec | Mapping[str, Any]], agents_dirs: DirLevels | None
) -> list[AnySpec]:
    specs = [coerce_spec(s) for s in subagents]
    if agents_dirs is None:
        return specs
    given = {s.name for s in specs}
    for spec in load_agent_dirs(agents_dirs):
        if spec.name in given:
            raise SpecError(
                f"{spec.source}: subagent {spec.name!r} is also passed in subagents=; "
                "each name must be unique (rename one, or drop one)"
            )
        specs.append(spec)
    return specs


def _with_skills(system_prompt: str | SystemMessage | None, skills: SkillCatalog) -> str | SystemMessage | None:
    block = skills.prompt_block()
    if not block:
        return system_prompt
    return with_text_appended(system_prompt, block)


def _root_approval(
    options: BuildOptions, tools: Sequence[Any], middleware: Sequence[Any]
) -> list[Any]:
    """The parent's own tools follow the policy its children inherit."""
    if any(isinstance(mw, HumanInTheLoopMiddleware) for mw in middleware):
        return []  # the caller's own approval middleware decides for the root
    # The middleware's tools too (deepagents' file tools): the root's tool node holds them.
    middleware_tools = [t for mw in middleware for t in getattr(mw, "tools", None) or () if not is_forbidden_tool(t)]
    rules = approval_rules(
        options.permission_mode,
        [tool_name(t) for t in [*tools, *middleware_tools]],
        risky_tools=options.risky_tools,
        interrupt_on=options.interrupt_on,
    )
    return [HumanInTheLoopMiddleware(interrupt_on=rules)] if rules else []


# ----------------------------------------------------------------------------
# The root agent's state: the conversation is checkpointed as its changes, not copied whole at every step.
#
# LangGraph's default ``messages`` channel writes the whole list into every
# checkpoint, so a thread of ``n`` steps stores ``O(n²)`` message bytes (a
# thousand delegations on one ``SqliteSaver`` thread wrote 3.9 GB). A
# :class:`~langgraph.channels.DeltaChannel` stores only each step's writes and
# a full snapshot every :data:`SNAPSHOT_EVERY` updates; reading a checkpoint
# replays at most that many writes onto the last snapshot. deepagents stores
# its root's messages the same way, snapshotting every 50 updates.
#
# Ours snapshots every 150: the snapshots are what a long thread's bytes grow
# with (each holds the whole conversation), and a read of a thread with
# ledgers walks back to the last ledger snapshot (50 delegations, some 300
# message updates back), decoding every whole conversation it passes on the
# way. At 50, a read passed about six; at 150, two, and it replays at most 150
# small writes.
# ----------------------------------------------------------------------------

SNAPSHOT_EVERY = 150
"""Updates of ``messages`` between full snapshots: what one read replays at most."""

LEDGER_SNAPSHOT_EVERY = 50
"""Updates of a ledger between whole-ledger snapshots, in a :class:`DeepAgentState` thread."""


def apply_message_writes(state: Sequence[Any] | None, writes: Sequence[Any]) -> list[AnyMessage]:
    """``state`` after ``writes``, in order, as LangGraph's ``add_messages`` would apply them one by one.

    A write is one message or a list of them (objects, dicts, tuples or
    strings). A message whose id is already present replaces it in place;
    ``RemoveMessage(id)`` drops it (an unknown id is ignored: replaying an old
    thread must not fail); ``RemoveMessage(REMOVE_ALL_MESSAGES)`` clears all
    before it. Applying two batches in turn equals applying them joined, as
    :class:`~langgraph.channels.DeltaChannel` requires.

    Example::

        >>> from langchain_core.messages import HumanMessage, AIMessage
        >>> [m.content for m in apply_message_writes([HumanMessage("hi", id="1")],
        ...                                          [[AIMessage("hello", id="2")], AIMessage("hey", id="2")])]
        ['hi', 'hey']
    """
    flat: list[Any] = []
    for write in writes:
        flat.extend(write) if isinstance(write, list) else flat.append(write)
    # The channel's own value is already messages; only raw input (dicts from a client) needs converting.
    current = list(state or ())
    if current and not all(isinstance(m, BaseMessage) for m in current):
        current = list(convert_to_messages(current))
    incoming = [message_chunk_to_message(m) if isinstance(m, BaseMessageChunk) else m
                for m in convert_to_messages(flat)]
    cleared = [i for i, m in enumerate(incoming) if isinstance(m, RemoveMessage) and m.id == REMOVE_ALL_MESSAGES]
    if cleared:
        current, incoming = [], incoming[cleared[-1] + 1:]
    merged: list[BaseMessage | None] = list(current)
    where = {m.id: i for i, m in enumerate(current) if m.id is not None}
    for message in incoming:
        if message.id is None:
            merged.append(message)
        elif isinstance(message, RemoveMessage):
            if (index := where.pop(message.id, None)) is not None:
                merged[index] = None
        elif (index := where.get(message.id)) is not None:
            merged[index] = message
        else:
            where[message.id] = len(merged)
            merged.append(message)
    return cast("list[AnyMessage]", [m for m in merged if m is not None])


class DeepAgentState(AgentState[Any]):
    """The state :func:`deep_agent.create_deep_agent` uses unless given ``state_schema``.

    Subclass it to add keys and keep the conversation stored as deltas::

        class MyState(DeepAgentState):
            notes: list[str]

        agent = create_deep_agent(model, state_schema=MyState)
    """

    messages: Required[Annotated[
        list[AnyMessage], DeltaChannel(apply_message_writes, snapshot_frequency=SNAPSHOT_EVERY)
    ]]
    # Beside delta messages the ledgers are deltas too: whole in every checkpoint, they would be most of its bytes.
    subagent_tasks: NotRequired[Annotated[
        dict[str, dict[str, Any]], LedgerChannel(dict, merge_records, snapshot_frequency=LEDGER_SNAPSHOT_EVERY)
    ]]
    async_tasks: NotRequired[Annotated[
        dict[str, dict[str, Any]], LedgerChannel(dict, merge_async_records, snapshot_frequency=LEDGER_SNAPSHOT_EVERY)
    ]]


def saved_messages(saver: Any, saved: Any) -> list[AnyMessage]:
    """The ``messages`` of a saved checkpoint tuple, whether stored whole or as deltas.

    A checkpoint of a :class:`DeepAgentState` thread holds ``messages`` only
    at a snapshot; in between, the value is the last snapshot plus the writes
    since, which the saver's ``get_delta_channel_history`` returns. Use this to
    read a thread straight from a checkpointer, without building the graph::

        saved = saver.get_tuple({"configurable": {"thread_id": "t1", "checkpoint_ns": ""}})
        messages = saved_messages(saver, saved)
    """
    channel = DeltaChannel(apply_message_writes, list, snapshot_frequency=SNAPSHOT_EVERY)
    return list(saved_value(saver, saved, "messages", channel) or [])


# ----------------------------------------------------------------------------
# deepagents' file tools, skills, memory and permissions for the root, from deepagents itself.
#
# ``create_deep_agent(backend=, skills=, memory=, permissions=)`` takes
# deepagents' arguments and composes deepagents' own maintained middleware
# (``FilesystemMiddleware``, ``SkillsMiddleware``, ``MemoryMiddleware``) into
# the root's stack, rather than a rewrite of them; delegation stays ours.
# They need the ``deepagents`` extra (``pip install
# "governed-subagents[deepagents]"``); without it, asking for any of them is
# an error that says so.
#
# Children inherit the tools these middleware give the root, by the one rule
# every ``task`` child follows: a child inherits the tools of the parent's
# tool node (minus the delegation tools), with the state keys those tools
# declare (``files`` for the file tools, shared both ways). The middleware's
# own prompt text and hooks stay with the root.
#
# Example::
#
#     from deepagents.backends import FilesystemBackend
#
#     agent = create_deep_agent(model, backend=FilesystemBackend(root_dir="."), memory=["/AGENTS.md"],
#                               skills=["/skills/"], permissions=[{"operations": ["write"], "paths": ["/**"],
#                                                                  "mode": "deny"}])
# ----------------------------------------------------------------------------

EXTRA_INSTALL = 'pip install "governed-subagents[deepagents]"'
"""What to run to get deepagents' middleware."""

DEFAULT_MODEL = "anthropic:claude-sonnet-4-6"
"""deepagents' default model, used (with its deprecation warning) when ``model=None``."""

MODEL_NONE_WARNING = (
    "Passing `model=None` to `create_deep_agent` is deprecated, as in deepagents: its default "
    f"({DEFAULT_MODEL}) is used. Specify a model explicitly (e.g. 'openai:gpt-4.1-mini')."
)


class MissingExtraError(SubagentsError, ImportError):
    """An argument needs an optional dependency that is not installed.

    Under the library's one error base (``SubagentsError``) and an
    ``ImportError``, which a caller may already catch.

    Attributes:
        arguments: the arguments that asked for it.
        extra: the extra to install.
    """

    def __init__(self, where: str, arguments: Sequence[str], extra: str = "deepagents") -> None:
        self.arguments, self.extra = tuple(arguments), extra
        names = ", ".join(repr(a) for a in arguments)
        super().__init__(
            f"{where}(): argument {names} uses deepagents' middleware, which is not installed: "
            f'pip install "governed-subagents[{extra}]"'
        )


def _given(value: Any) -> bool:
    return value is not None and not (isinstance(value, (list, tuple, set, frozenset)) and not value)


def deepagents_root_middleware(
    *,
    backend: Any = None,
    skills: Sequence[str] | None = None,
    memory: Sequence[str] | None = None,
    permissions: Sequence[Any] | None = None,
    existing: Sequence[Any] = (),
) -> list[Any]:
    """deepagents' middleware for what was asked, in deepagents' order; ``[]`` when nothing was.

    ``backend`` defaults to deepagents' ``StateBackend`` (the ``files`` state
    key). A middleware of the same name in ``existing`` (the caller's own
    ``middleware=``) wins, as in deepagents, and is not added twice.
    ``permissions`` are ``FilesystemPermission`` rules or dicts of their fields.

    Raises:
        MissingExtraError: deepagents is not installed.
        ValueError: a permission rule is malformed or asks for ``"interrupt"``.
    """
    asked = [name for name, value in (("backend", backend), ("skills", skills), ("memory", memory),
                                      ("permissions", permissions)) if _given(value)]
    if not asked:
        return []
    try:
        from deepagents.backends import StateBackend
        from deepagents.middleware.filesystem import FilesystemMiddleware
        from deepagents.middleware.memory import MemoryMiddleware
        from deepagents.middleware.skills import SkillsMiddleware
    except ImportError:
        raise MissingExtraError("create_deep_agent", asked) from None
    store = backend if backend is not None else StateBackend()
    taken = {getattr(mw, "name", None) for mw in existing}
    stack: list[Any] = []
    if FilesystemMiddleware.__name__ not in taken:
        stack.append(FilesystemMiddleware(backend=store, permissions=_permissions(permissions)))
    if _given(skills) and SkillsMiddleware.__name__ not in taken:
        stack.append(SkillsMiddleware(backend=store, sources=list(_paths("skills", skills))))
    if _given(memory) and MemoryMiddleware.__name__ not in taken:
        stack.append(MemoryMiddleware(backend=store, sources=list(_paths("memory", memory)), add_cache_control=True))
    return stack


def deepagents_backend(
    backend: Any = None,
    *,
    skills: Sequence[str] | None = None,
    memory: Sequence[str] | None = None,
    permissions: Sequence[Any] | None = None,
) -> Any:
    """The deepagents backend the agent's files live on: ``backend``, or deepagents' ``StateBackend`` default.

    As in deepagents, ``skills=``, ``memory=`` or ``permissions=`` without a
    ``backend`` mean the ``files`` state key, and a spec's skill paths are
    read from there too. ``None`` when none of the four was given (call
    :func:`deepagents_root_middleware` first: it raises when the extra is
    missing).
    """
    if backend is not None or not any(_given(v) for v in (skills, memory, permissions)):
        return backend
    from deepagents.backends import StateBackend

    return StateBackend()


def _paths(argument: str, value: Any) -> Sequence[str]:
    if isinstance(value, str) or not all(isinstance(p, str) for p in value):
        raise ValueError(f"create_deep_agent(): argument {argument!r}: expected a list of backend paths (str), "
                         f"got {type(value).__name__}")
    return list(value)


def _permissions(rules: Sequence[Any] | None,
                 where: str = "create_deep_agent(): argument 'permissions'") -> list[Any] | None:
    """Rules as ``FilesystemPermission`` objects; an ``interrupt`` rule is refused with what to write."""
    if not _given(rules):
        return None
    from deepagents.middleware.filesystem import FilesystemPermission

    out = []
    for i, rule in enumerate(rules or ()):
        if isinstance(rule, Mapping):
            try:
                rule = FilesystemPermission(**rule)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{where}, item {i}: {exc}") from None
        if not isinstance(rule, FilesystemPermission):
            raise ValueError(f"{where}, item {i}: expected a "
                             f"FilesystemPermission or a dict of its fields, got {type(rule).__name__}")
        if rule.mode == "interrupt":
            # The approval would need deepagents' private predicate on HumanInTheLoopMiddleware.
            raise ValueError(
                f"{where}, item {i}: mode 'interrupt' is not supported; "
                "ask for approval with interrupt_on={'write_file': True, ...} and keep 'allow'/'deny' rules here"
            )
        out.append(rule)
    return out


def general_purpose_with_root_skills(
    specs: Sequence[Any], *, enabled: bool, backend: Any = None, skills: Sequence[str] | None = None,
) -> list[Any]:
    """``specs`` with a ``general-purpose`` child that has the root's deepagents skills, as in deepagents.

    In deepagents the general-purpose child inherits ``skills=`` (a custom
    child only gets the skills its spec names); here too: it gets its own
    deepagents ``SkillsMiddleware`` over the same backend and sources. When
    no skills were given, general-purpose is off, or a spec already has the
    name, ``specs`` are returned as they are.
    """
    from middleware.task_tool import (
        GENERAL_PURPOSE_DESCRIPTION,
        GENERAL_PURPOSE_NAME,
        GENERAL_PURPOSE_PROMPT,
    )
    from subagents.spec import SubagentSpec

    names = {s.get("name") if isinstance(s, Mapping) else getattr(s, "name", None) for s in specs}
    if not enabled or not _given(skills) or GENERAL_PURPOSE_NAME in names:
        return list(specs)
    from deepagents.backends import StateBackend
    from deepagents.middleware.skills import SkillsMiddleware

    store = backend if backend is not None else StateBackend()
    general = SubagentSpec(name=GENERAL_PURPOSE_NAME, description=GENERAL_PURPOSE_DESCRIPTION,
                           system_prompt=GENERAL_PURPOSE_PROMPT,
                           middleware=[SkillsMiddleware(backend=store, sources=list(_paths("skills", skills)))])
    return [general, *specs]


def backend_skills_for_specs(specs: Sequence[Any], *, backend: Any = None) -> list[Any]:
    """Dict specs whose ``skills`` are paths on ``backend`` get deepagents' ``SkillsMiddleware``, as in deepagents.

    Only when the agent has a deepagents backend (``backend=``, or the
    ``StateBackend`` that ``skills=``, ``memory=`` or ``permissions=`` bring,
    see :func:`deepagents_backend`): then a
    spec's ``skills`` entry with a ``/`` is a skill source on that backend
    (deepagents' meaning) and becomes the child's own ``SkillsMiddleware``;
    other entries stay skill names from ``skills_dirs``. Without a backend,
    specs are returned as they are (their ``skills`` are names or local folders).
    """
    if backend is None:
        return list(specs)
    from deepagents.middleware.skills import SkillsMiddleware

    out: list[Any] = []
    for spec in specs:
        skills = spec.get("skills") if isinstance(spec, Mapping) else None
        sources = [s for s in skills or () if isinstance(s, str) and "/" in s]
        if not sources:
            out.append(spec)
            continue
        rest = [s for s in skills or () if s not in sources]
        changed = {k: v for k, v in spec.items() if k != "skills"}
        if rest:
            changed["skills"] = rest
        changed["middleware"] = [*(spec.get("middleware") or ()), SkillsMiddleware(backend=backend, sources=sources)]
        out.append(changed)
    return out


def backend_permissions_for_specs(specs: Sequence[Any], *, backend: Any = None) -> list[Any]:
    """Dict specs with ``permissions`` get deepagents' ``FilesystemMiddleware`` under those rules, as in deepagents.

    Only when the agent has a deepagents backend (see
    :func:`deepagents_backend`): the child then gets its own file tools over
    that backend, under its own rules, in place of the root's (which carry the
    root's rules: a spec's rules replace the parent's, as in deepagents). A
    spec that inherits the root's tools has the root's file tools left out;
    one with its own ``tools`` gains the file tools. Without a backend, specs
    are returned as they are (and ``permissions`` is refused when the spec is
    read, saying what to write instead).

    Raises:
        SpecError: a rule is malformed or asks for ``"interrupt"``, or the
            spec's ``middleware`` already has a ``FilesystemMiddleware``
            (give it the rules instead).
    """
    if backend is None:
        return list(specs)
    from deepagents.middleware.filesystem import FilesystemMiddleware

    out: list[Any] = []
    for spec in specs:
        rules = spec.get("permissions") if isinstance(spec, Mapping) else None
        if not _given(rules):
            out.append(spec)
            continue
        label = f"subagent {spec.get('name')!r}: field 'permissions'"
        own = list(spec.get("middleware") or ())
        if any(isinstance(mw, FilesystemMiddleware) for mw in own):
            raise SpecError(f"{label}: the spec's middleware has its own FilesystemMiddleware; "
                            "give it the rules (FilesystemMiddleware(permissions=...)) instead")
        try:
            files = FilesystemMiddleware(backend=backend, permissions=_permissions(rules, label))
        except ValueError as exc:
            raise SpecError(str(exc)) from None
        changed = {k: v for k, v in spec.items() if k != "permissions"}
        changed["middleware"] = [*own, files]
        if spec.get("tools") is None:
            # The root's file tools carry the root's rules: this child's own replace them.
            left_out = [*(spec.get("disallowed_tools") or ()), *(t.name for t in files.tools)]
            changed["disallowed_tools"] = list(dict.fromkeys(left_out))
        out.append(changed)
    return out
