"""``create_deep_agent``: a root agent that delegates through ``task``, from our arguments or deepagents'."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, NotRequired, Required, cast, get_args

from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, ModelCallLimitMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    message_chunk_to_message,
)
from langgraph.cache.base import BaseCache
from langgraph.channels import DeltaChannel
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Checkpointer

from deep_agent._deepagents import DeepagentsToolHint, MissingExtraError, missing_tool_hints
from middleware._root_turn_limit import RootTurnLimit
from middleware._subagents import SubAgentMiddleware
from middleware._task_tool import LEDGER_KEY, TASK_TOOL_NAME, check_ledger_fields, open_calls, with_general_purpose
from subagents import AnySpec, SpecError, coerce_spec, load_agent_dirs
from subagents._boundary import (
    is_forbidden_tool,
    parent_state_schemas,
    private_state_keys,
    tool_name,
    with_text_appended,
)
from subagents._errors import InvalidArgumentType
from subagents._ledger import LedgerChannel, merge_async_records, merge_records, saved_value
from subagents._settings import Definitions, DelegationSettings
from subagents._spec import is_async_spec
from subagents.definitions._permissions import approval_rules


def resolve_root_model(model: str | BaseChatModel | None) -> BaseChatModel:
    """A ``"provider:model"`` string through ``init_chat_model``, or the model itself (``None``: deepagents'
    deprecated default, with a ``DeprecationWarning``)."""
    if model is None:
        model = "anthropic:claude-sonnet-4-6"  # deepagents' default
        warnings.warn(f"Passing `model=None` to `create_deep_agent` is deprecated, as in deepagents: its default "
                      f"({model}) is used. Specify a model explicitly (e.g. 'openai:gpt-4.1-mini').",
                      DeprecationWarning, stacklevel=3)
    if isinstance(model, str):
        from langchain.chat_models import init_chat_model

        return init_chat_model(model)
    if not isinstance(model, BaseChatModel):
        raise InvalidArgumentType(f"model: expected a 'provider:model' string or a BaseChatModel, "
                                  f"got {type(model).__name__}")
    return model


def create_deep_agent(
    model: str | BaseChatModel | None = None,
    tools: Sequence[Any] | None = (),
    *,
    system_prompt: str | SystemMessage | None = None,
    middleware: Sequence[Any] | None = (),
    subagents: Sequence[AnySpec | Mapping[str, Any]] | None = (),
    skills: Sequence[str] | None = None,
    memory: Sequence[str] | None = None,
    permissions: Sequence[Any] | None = None,
    backend: Any = None,
    interrupt_on: Mapping[str, Any] | None = None,
    response_format: Any = None,
    state_schema: type[AgentState[Any]] | None = None,
    context_schema: type[Any] | None = None,
    checkpointer: Checkpointer | None = None,
    store: BaseStore | None = None,
    debug: bool = False,
    name: str | None = None,
    cache: BaseCache[Any] | None = None,
    settings: DelegationSettings | None = None,
    background: bool = False,
    hooks: Mapping[str, Any] | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build a compiled root agent whose subagents are reached through ``task`` (docs/migrating.md).

    The first eighteen arguments are deepagents' ``create_deep_agent``'s (``backend``, ``skills``, ``memory``
    and ``permissions`` need the ``deepagents`` extra); ``interrupt_on`` gates the root's own tools and, as a floor
    no spec lowers, every child's (docs/approvals.md). ``settings``: every other option (``budget``,
    ``permission_mode``, ``mcp_servers`` ...), each once, in one :class:`subagents.DelegationSettings` (one home per
    option: a deepagents keyword is not also a setting, a setting not also a keyword). ``background``: also the
    background-task tools (docs/background.md); ``hooks``: Claude Code hooks for the root
    (:class:`subagents.definitions.HookMiddleware`).
    """
    tools, subagents, middleware = list(tools or ()), subagents or (), middleware or ()
    if interrupt_on is not None and not isinstance(interrupt_on, Mapping):
        raise InvalidArgumentType(f"create_deep_agent: argument 'interrupt_on': expected a mapping of tool name to "
                                  f"rule, got {interrupt_on!r}")
    settings = settings or DelegationSettings()
    root = settings.root
    with_deepagents = uses_deepagents(root.deepagents_stack, backend=backend, skills=skills, memory=memory,
                                      permissions=permissions)
    if with_deepagents:
        permissions = _permissions(permissions)
        skills, memory = _paths("skills", skills), _paths("memory", memory)
        # Without one of the four, no backend: a spec's ``skills`` then stay folders on disk (docs/migrating.md).
        backend = _or_state_backend(backend) if any(_given(v) for v in (skills, memory, permissions)) else backend
    # deepagents resolves a model name itself (its provider profiles): children inherit the model it made.
    root_model = None if with_deepagents and isinstance(model, str | None) else resolve_root_model(model)
    remote = (*settings.background.background_subagents, *(s for s in subagents if is_async_spec(s)))
    settings = settings.updated(state_schemas=parent_state_schemas(state_schema, middleware))
    check_ledger_fields(state_schema, "create_deep_agent: argument 'state_schema'")
    skill_block = settings.definitions.skills().prompt_block()
    declared = [s for s in subagents if not is_async_spec(s)]
    if with_deepagents:
        declared = with_deepagents_child_defaults(declared, backend=backend, middleware=middleware,
                                                  model=root_model)
    rules_on = _or_state_backend(backend) if with_deepagents else backend
    declared = [_backend_permissions(_backend_skills(s, backend), rules_on) for s in declared]
    specs = [coerce_spec(s) for s in declared]
    given, agents_dirs = {s.name for s in specs}, settings.definitions.agents_dirs
    for spec in load_agent_dirs(agents_dirs) if agents_dirs is not None else ():
        if spec.name in given:
            raise SpecError(f"{spec.source}: subagent {spec.name!r} is also passed in subagents=; "
                            "each name must be unique (rename one, or drop one)")
        specs.append(spec)
    if _given(skills):  # with the deepagents stack: the general-purpose child has the root's skills, as in deepagents
        from deepagents.middleware.skills import SkillsMiddleware

        specs = with_general_purpose(specs, settings.definitions.general_purpose,
                                     middleware=[SkillsMiddleware(backend=backend, sources=list(skills or ()))])
    private = private_state_keys([*middleware, *([state_schema] if state_schema is not None else [])])
    # Without deepagents' stack, a call to one of its tools is told where the tool comes from (children too).
    hint = [] if with_deepagents else [DeepagentsToolHint(missing_tool_hints(left_out=root.deepagents_stack is False))]
    own_tools = bool(tools) or any(getattr(mw, "tools", None) for mw in middleware)
    # The root's interrupt_on reaches every child as the parent's approval middleware does: a floor.
    floor = [HumanInTheLoopMiddleware(interrupt_on=dict(interrupt_on))] if interrupt_on else []
    inherited = [*middleware, *hint, *floor]
    # tools=None: children inherit the root's tool node (its middleware's tools too), as in a plain create_agent.
    delegation = SubAgentMiddleware(specs, model=root_model, tools=None, model_middleware=inherited,
                                    private_state_keys=private, settings=settings)
    extra: list[Any] = []
    root_hooks: list[Any] = []
    if hooks:
        from subagents.definitions._hooks import HookMiddleware  # its subprocess runner: only for hooks

        try:
            # The tools besides `task` that start child work: a root `PreToolUse` matcher for `task` covers them.
            root_hooks = [HookMiddleware(hooks, scope="root", delegation=(TASK_TOOL_NAME, LEDGER_KEY),
                                         also_delegating=("start_async_task", "retry_async_task", "create_subagent"))]
        except ValueError as exc:
            raise SpecError(f"hooks: {exc}") from None
    if background or remote:
        from middleware._background import BackgroundSubagentMiddleware

        # Given the delegation middleware, it leaves out of its listing the agents `task` lists.
        tracked = BackgroundSubagentMiddleware([*specs, *remote], model=root_model, tools=None,
                                               model_middleware=[*inherited, delegation], private_state_keys=private,
                                               settings=settings)
        # Root SubagentStop hooks fire when a background child ends, as when a `task` returns.
        tracked.tasks.on_end.extend(h.background_task_ended for h in root_hooks)
        if with_deepagents:
            # A harness profile excluding deepagents' AsyncSubAgentMiddleware drops it (read from `excluded_as`).
            from deepagents import AsyncSubAgentMiddleware

            cast(Any, tracked).excluded_as = AsyncSubAgentMiddleware
        extra.append(tracked)
    # The cap on the root's model calls, built even where the caller's own model call limit replaces it (a bad value
    # is refused; two would count into the same state keys: the caller's decides).
    turn_limit = [RootTurnLimit(limit, name=name)] if (limit := settings.limits.max_root_turns) is not None else []
    # deepagents' own file tools are the root's too (its FilesystemMiddleware is built inside deepagents).
    file_tools = deepagents_file_tool_names(backend, middleware) if with_deepagents else []
    stack = [*middleware, *_root_approval(settings.definitions, interrupt_on, tools, middleware, file_tools),
             *root_hooks, *([] if any(isinstance(mw, ModelCallLimitMiddleware) for mw in middleware) else turn_limit),
             delegation, *extra,
             *(hint if own_tools or delegation.tools or extra else []),
             *(_root_patch_tool_calls(middleware) if with_deepagents else ())]
    common = dict(system_prompt=with_text_appended(system_prompt, skill_block) if skill_block else system_prompt,
                  response_format=response_format,
                  state_schema=state_schema if state_schema is not None else DeepAgentState,
                  context_schema=context_schema, checkpointer=checkpointer, store=store, debug=debug, name=name,
                  cache=cache, interrupt_before=root.interrupt_before, interrupt_after=root.interrupt_after)
    if root_model is None or with_deepagents:
        graph = deepagents_agent(model, tools, stack, backend=backend, skills=skills, memory=memory,
                                 permissions=permissions, interrupt_on=interrupt_on, **common)
    else:
        graph = create_agent(root_model, tools, middleware=stack, **common)
    # A root middleware's own model calls go around the root's model-call wrap: the meter counts them.
    return delegation.metered(graph)


def _root_patch_tool_calls(middleware: Sequence[Any]) -> list[Any]:
    """deepagents' patch of unanswered tool calls, except the turn a stopped run left (answered from its records)."""
    from deepagents.middleware.patch_tool_calls import PatchToolCallsMiddleware

    if any(getattr(mw, "name", None) == PatchToolCallsMiddleware.__name__ for mw in middleware):
        return []

    class PatchOlderToolCalls(PatchToolCallsMiddleware):
        name = PatchToolCallsMiddleware.__name__  # deepagents' own is replaced by name

        def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            messages = state["messages"]
            left = open_calls(messages) if messages and isinstance(messages[-1], HumanMessage) else []
            if not left:
                return super().before_agent(state, runtime)
            # Answered for deepagents' patch only, and taken out of what it returns: the model step answers them.
            stand_ins = [ToolMessage("", tool_call_id=call["id"]) for call in left]
            patched = super().before_agent(cast("Any", {**state, "messages": [*messages, *stand_ins]}), runtime)
            return None if patched is None else {"messages": [m for m in patched["messages"]
                                                              if not any(m is s for s in stand_ins)]}

    return [PatchOlderToolCalls()]


def _root_approval(definitions: Definitions, interrupt_on: Mapping[str, Any] | None, tools: Sequence[Any],
                   middleware: Sequence[Any], also: Sequence[str] = ()) -> list[Any]:
    """The parent's own tools follow the policy its children inherit."""
    if any(isinstance(mw, HumanInTheLoopMiddleware) for mw in middleware):
        return []  # the caller's own approval middleware decides for the root
    # The middleware's tools too (deepagents' file tools): the root's tool node holds them.
    middleware_tools = [t for mw in middleware for t in getattr(mw, "tools", None) or () if not is_forbidden_tool(t)]
    names = list(dict.fromkeys([*(tool_name(t) for t in [*tools, *middleware_tools]), *also]))
    rules = approval_rules(definitions.permission_mode, names, risky_tools=definitions.risky_tools,
                           interrupt_on=interrupt_on)
    return [HumanInTheLoopMiddleware(interrupt_on=rules)] if rules else []


# The root's conversation is checkpointed as its changes (a DeltaChannel): the default channel writes
# the whole list into every checkpoint, O(n^2) bytes per thread. Snapshots every 150 updates (deepagents:
# 50) because snapshots hold the whole conversation and a read walks back to the last ledger snapshot.

SNAPSHOT_EVERY = 150  # updates of ``messages`` between full snapshots: what one read replays at most
LEDGER_SNAPSHOT_EVERY = 50


def apply_message_writes(state: Sequence[Any] | None, writes: Sequence[Any]) -> list[AnyMessage]:
    """``state`` after ``writes``, as ``add_messages`` applies them one by one; an unknown ``RemoveMessage`` id is
    ignored (an old thread replays). Two batches in turn equal them joined, as ``DeltaChannel`` requires."""
    flat = [m for write in writes for m in (write if isinstance(write, list) else [write])]
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
    """The state :func:`deep_agent.create_deep_agent` uses unless given ``state_schema``: subclass it to add keys
    and keep the conversation stored as deltas (docs/ledger-and-budgets.md)."""

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
    """The ``messages`` of a saved checkpoint tuple (``saver.get_tuple(config)``), stored whole or as deltas."""
    channel = DeltaChannel(apply_message_writes, list, snapshot_frequency=SNAPSHOT_EVERY)
    return list(saved_value(saver, saved, "messages", channel) or [])


# With the deepagents extra, the root is deepagents' own ``create_deep_agent``: deepagents exposes no list
# of its default middleware, so the seam is its documented merge of ``middleware=`` by name (our
# ``SubAgentMiddleware`` replaces its own). Declarative children are still built by our builder.


def _given(value: Any) -> bool:
    return value is not None and not (isinstance(value, (list, tuple, set, frozenset)) and not value)


def uses_deepagents(choice: bool | None, **arguments: Any) -> bool:
    """Whether the root is deepagents' stack: ``choice``, else whether deepagents is installed."""
    asked = [name for name, value in arguments.items() if _given(value)]
    if choice is False:
        if asked:
            raise SpecError(f"create_deep_agent(): argument {asked[0]!r} is deepagents' and needs its stack; "
                            "drop deepagents_stack=False")
        return False
    try:
        import deepagents  # noqa: F401
    except ImportError:
        if asked or choice:
            raise MissingExtraError("create_deep_agent()", asked or ["deepagents_stack"]) from None
        return False
    return True


def deepagents_agent(model: str | BaseChatModel | None, tools: Sequence[Any], stack: Sequence[Any], *,
                     interrupt_before: list[str] | None = None, interrupt_after: list[str] | None = None,
                     **arguments: Any) -> CompiledStateGraph[Any, Any, Any, Any]:
    """deepagents' ``create_deep_agent`` for the same arguments, with ``stack`` merged in by name."""
    from deepagents import create_deep_agent as deepagents_create_deep_agent

    if model is not None:
        graph = deepagents_create_deep_agent(model, list(tools), middleware=list(stack), **arguments)
    else:
        # deepagents' deprecation of model=None names its caller's line, which is ours: name the user's.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            graph = deepagents_create_deep_agent(model, list(tools), middleware=list(stack), **arguments)
        for warning in caught:
            warnings.warn(warning.message, warning.category, stacklevel=3)
    if interrupt_before or interrupt_after:  # create_agent's arguments, which deepagents does not take
        graph = graph.copy(update={"interrupt_before_nodes": interrupt_before or [],
                                   "interrupt_after_nodes": interrupt_after or []})
    return graph


def deepagents_file_tool_names(backend: Any, middleware: Sequence[Any]) -> list[str]:
    """The file tools deepagents gives an agent, unless ``middleware`` brings its own (``execute`` only if it runs)."""
    from deepagents import FilesystemMiddleware, FsToolName
    from deepagents.backends.protocol import SandboxBackendProtocol

    if any(isinstance(mw, FilesystemMiddleware) for mw in middleware):
        return [t.name for mw in middleware if isinstance(mw, FilesystemMiddleware) for t in mw.tools]
    return [n for n in get_args(FsToolName) if n != "execute" or isinstance(backend, SandboxBackendProtocol)]


def with_deepagents_child_defaults(specs: Sequence[Any], *, backend: Any, middleware: Sequence[Any],
                                   model: BaseChatModel | None) -> list[Any]:
    """Dict specs with deepagents' subagent defaults: the root's file tools, named (a child shares ``files``, the
    parent's approvals gate them), summarisation (given a model object), tool-call patching; a spec's own middleware
    of the same name replaces a default."""
    from deepagents.middleware.patch_tool_calls import PatchToolCallsMiddleware
    from deepagents.middleware.summarization import create_summarization_middleware

    names = deepagents_file_tool_names(backend, middleware)
    store = _or_state_backend(backend)
    out: list[Any] = []
    for spec in specs:
        own_middleware = spec.get("middleware") if isinstance(spec, Mapping) else None
        if (not isinstance(spec, Mapping) or "runnable" in spec
                or not isinstance(own_middleware, list | tuple | None)):  # a bad field is refused when read
            out.append(spec)
            continue
        changed = dict(spec)
        own = spec.get("tools")
        if isinstance(own, list | tuple):  # None inherits the file tools; anything else is refused when read
            listed = {t if isinstance(t, str) else tool_name(t) for t in own}
            changed["tools"] = [*own, *(n for n in names if n not in listed)]
        child = spec.get("model") or model
        summarise = [create_summarization_middleware(child, store)] if isinstance(child, BaseChatModel) else []
        defaults: list[Any] = [*summarise, PatchToolCallsMiddleware()]
        taken = {getattr(mw, "name", None) for mw in own_middleware or ()}
        changed["middleware"] = [*(mw for mw in defaults if mw.name not in taken), *(own_middleware or ())]
        out.append(changed)
    return out


def _or_state_backend(backend: Any) -> Any:
    """``backend``, else deepagents' ``StateBackend`` (files kept in the agent's state)."""
    from deepagents.backends import StateBackend

    return backend if backend is not None else StateBackend()


def _paths(argument: str, value: Any) -> Sequence[str] | None:
    if value is None:
        return None
    if isinstance(value, str) or not all(isinstance(p, str) for p in value):
        raise SpecError(f"create_deep_agent(): argument {argument!r}: expected a list of backend paths (str), "
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
                raise SpecError(f"{where}, item {i}: {exc}") from None
        if not isinstance(rule, FilesystemPermission):
            raise SpecError(f"{where}, item {i}: expected a "
                            f"FilesystemPermission or a dict of its fields, got {type(rule).__name__}")
        if rule.mode == "interrupt":
            # The approval would need deepagents' private predicate on HumanInTheLoopMiddleware.
            raise SpecError(f"{where}, item {i}: mode 'interrupt' is not supported; ask for approval with "
                            "interrupt_on={'write_file': True, ...} and keep 'allow'/'deny' rules here")
        out.append(rule)
    return out


def _backend_skills(spec: Any, backend: Any) -> Any:
    """A dict spec whose ``skills`` hold backend paths (a ``/``) gets deepagents' ``SkillsMiddleware`` for them."""
    skills: Any = spec.get("skills") if isinstance(spec, Mapping) and backend is not None else None
    sources = [s for s in skills or () if isinstance(s, str) and "/" in s]
    if not sources:
        return spec
    from deepagents.middleware.skills import SkillsMiddleware

    changed = {k: v for k, v in spec.items() if k != "skills"}
    if rest := [s for s in skills if s not in sources]:
        changed["skills"] = rest
    changed["middleware"] = [*(spec.get("middleware") or ()), SkillsMiddleware(backend=backend, sources=sources)]
    return changed


def _backend_permissions(spec: Any, backend: Any) -> Any:
    """A dict spec with ``permissions`` gets deepagents' ``FilesystemMiddleware`` under those rules (as deepagents)."""
    rules = spec.get("permissions") if isinstance(spec, Mapping) and backend is not None else None
    if not _given(rules):
        return spec
    from deepagents.middleware.filesystem import FilesystemMiddleware

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
    return changed
