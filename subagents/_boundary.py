"""The boundary between parent and child, and the write-back rule.

For each key the child changed (never an excluded or private key): a **reducer key** gets only the child's own
contribution (items appended, dict entries added or changed, set members added; a replaced value is no
addition); a **plain key** its final value, only when the ``task`` call has no parallel sibling; a key the
parent's state lacks nothing. Every key not written is named in ``skipped_writes`` with the reason; each write
is tried on a copy of the parent's channel first, so a value its reducer rejects is skipped, never a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import dataclasses
import datetime
import decimal
import enum
import fractions
import functools
import gc
import inspect
import io
import logging
import mmap
import os
import re
import signal
import socket
import sys
import threading
import types
import weakref
import zoneinfo
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, Protocol, TypedDict, cast, get_args, get_origin, get_type_hints

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import StructuredTool, Tool
from langgraph.types import Command
from langgraph.typing import ContextT

from subagents._errors import SubagentsError, from_signal_handler, is_real_cancellation, safe_text
from subagents._plans import ModelCallPlan
from subagents._roles import ChildPolicy, policy_of

log = logging.getLogger(__name__)

# -- The boundary, both ways: a child receives the parent's state minus the blocked keys, ``messages`` being
# one ``HumanMessage``, on its own copies (:func:`own_copies`), so a failed child or a parallel sibling's plain
# key leaves the parent as it was. What comes back is what changed, judged against the parent's values.

CORE_EXCLUDED_KEYS: frozenset[str] = frozenset({"messages", "structured_response", "jump_to"})
"""Keys the runner itself owns: rebuilt for the child, never written back."""


def private_state_keys(middleware: Iterable[Any]) -> frozenset[str]:
    """Keys that the given middleware (instances or classes) or state schemas mark private (LangChain's
    ``PrivateStateAttr``), e.g. ``run_model_call_count`` for ``ModelCallLimitMiddleware``."""
    from langchain.agents.middleware.types import OmitFromSchema

    keys: set[str] = set()
    for mw in middleware:
        schema = getattr(mw, "state_schema", None)
        if schema is None and isinstance(mw, type):  # a state schema itself (a TypedDict class)
            schema = mw
        for key, hint in (_hints(schema) if schema is not None else {}).items():
            for meta in annotations_of(hint):
                if isinstance(meta, OmitFromSchema) and meta.input and meta.output:
                    keys.add(key)
    return frozenset(keys)


@functools.cache
def langchain_private_state_keys() -> frozenset[str]:
    """Private keys of LangChain's exported middleware classes: always blocked, since a tool cannot ask the
    parent graph which middleware it runs."""
    import langchain.agents.middleware as lc

    classes = [getattr(lc, name) for name in lc.__all__]
    return private_state_keys(c for c in classes if isinstance(c, type) and hasattr(c, "state_schema"))


def annotations_of(hint: Any) -> tuple[Any, ...]:
    """The ``Annotated`` metadata of a state key's hint, under any ``NotRequired``/``Required``."""
    from typing import NotRequired, Required

    while get_origin(hint) in (NotRequired, Required):
        hint = get_args(hint)[0]
    return tuple(getattr(hint, "__metadata__", ()))


def child_input(parent_state: Mapping[str, Any], description: str, blocked: frozenset[str]) -> dict[str, Any]:
    """The child's initial state: shared keys by reference, one fresh message."""
    state = {k: v for k, v in parent_state.items() if k not in blocked}
    state["messages"] = [HumanMessage(content=description)]
    return state


_IMMUTABLE = frozenset({str, bytes, int, float, bool, complex, type(None), decimal.Decimal, fractions.Fraction,
                        datetime.date, datetime.timedelta, datetime.timezone, zoneinfo.ZoneInfo, range})
"""Values no one can change in place (see :func:`_immutable` for tuples, enums and zoned times)."""
_ZONED = (datetime.datetime, datetime.time)
"""Immutable but for their time zone, which may be any class's (and which the garbage collector does not see)."""
_OS_HANDLES = (mmap.mmap, io.FileIO, socket.socket)
"""No deep copy can copy these: one holding such a handle opened the same OS resource again (``SharedMemory``)."""


def _immutable(value: Any) -> bool:
    """Whether ``value`` is immutable all the way down (code, a class or function its module names, counts): shared."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) in (tuple, frozenset):
            if len(stack) > 100_000:
                return False
            stack.extend(item)
        elif isinstance(item, enum.Enum):  # as immutable as its data type and its fields (one for ever: no copy)
            data = getattr(type(item), "_member_type_", None)  # a member of a `list` enum is a list, whatever its value
            if data is not object and data not in _IMMUTABLE:
                return False
            stack.extend(vars(item).values())
        elif type(item) in _ZONED:  # as its time zone: one its library keeps once (pytz, dateutil) is shared
            if not _one_zone(item.tzinfo):
                stack.append(item.tzinfo)
        elif type(item) not in _IMMUTABLE and not isinstance(item, type) and not _named_code(item):
            return False
    return True


def _one_zone(zone: datetime.tzinfo | None) -> bool:
    """Whether ``zone`` is one its library keeps once (pytz's UTC, dateutil's, a ``ZoneInfo``): deep-copied as itself
    by ``__reduce__``, no fields nor copy hook (or ``__getattr__`` lending one); else copied with its datetime."""
    hooked = any(inspect.getattr_static(zone, hook, None) is not None for hook in ("__deepcopy__", "__copy__",
                                                                                    "__getattr__"))
    if zone is None or hooked or inspect.isfunction(inspect.getattr_static(zone, "__getattribute__", None)):
        return False
    try:
        if copy.deepcopy(zone) is not zone:
            return False
    except Exception:  # noqa: BLE001 - a zone that cannot be copied is not one kept once
        return False
    # Kept once, but shared only if it holds nothing of its own but its class and an empty ``__dict__`` (a field
    # set on a ``ZoneInfo`` subclass's zone would be the caller's).
    own = getattr(zone, "__dict__", None)
    return all(part is type(zone) or (part is own and type(part) is dict and not part)
               for part in gc.get_referents(zone))


def _named_code(value: Any) -> bool:
    """Whether ``value`` is a function or class its module names (top level or class body); a lambda, an inner
    function or a class made at run time is not: what it closes over or holds may be the caller's."""
    if not (type(value) is types.FunctionType or isinstance(value, type)) or "<" in value.__qualname__:
        return False
    found: Any = sys.modules.get(value.__module__)
    for part in value.__qualname__.split("."):  # the module's and classes' own dicts: no __getattr__ runs
        found = getattr(found, "__dict__", {}).get(part)
    return found is value


def _reachable(value: Any, code: set[int], *, copied: bool = False) -> dict[int, Any]:
    """Every mutable object ``value`` holds (itself too), by id, as the GC sees them (not a function's globals or code)
    and live weak references; classes are code, bar one a deep copy made (not in ``code``, unnamed by its module)."""
    found: dict[int, Any] = {}
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, type) and (not copied or id(item) in code or _named_code(item)):
            code.add(id(item))
            continue
        if id(item) in found or (not isinstance(item, type) and _immutable(item)):
            continue
        if type(item) not in (tuple, frozenset):  # a tuple of unchanged items is the same tuple: fine
            found[id(item)] = item
        if isinstance(item, types.ModuleType):
            continue  # held as a whole: a copy holding it holds the original
        kind = type(item)
        if isinstance(item, weakref.ReferenceType):
            stack.append(weakref.ReferenceType.__call__(item))  # not a subclass's own __call__
        elif kind in weakref.ProxyTypes:
            with contextlib.suppress(ReferenceError):  # a proxy forwards getattr: the method is bound to its object
                stack.append(getattr(item.__sizeof__, "__self__", None))
        parts = gc.get_referents(item) + ([item.tzinfo] if isinstance(item, _ZONED) else [])
        if kind.__dictoffset__ and not isinstance(item, type):  # an instance's attributes may live inline, its
            # ``__dict__`` made only when asked: made now, a copy's ``__deepcopy__`` handing it on holds an original
            with contextlib.suppress(Exception):
                parts.append(object.__getattribute__(item, "__dict__"))
        if kind is types.FunctionType:  # its globals are its module's, every function's of it; its closure its own
            shared = {id(item.__globals__), id(item.__builtins__), id(item.__code__)}
            parts = [part for part in parts if id(part) not in shared]
        stack.extend(parts)
    return found


def _shared_with(copied: Any, original: Any, parents: dict[int, Any], code: set[int]) -> str | None:
    """What a deep copy still shares with the parent's values (``parents``: all they hold, by id), named for the
    record (``None``: nothing mutable). Any key's, not only its own: a copy may hand back another key's object."""
    if copied is original:
        return f"its deep copy is the original {type_name(original)}"
    for key, item in _reachable(copied, code, copied=True).items():
        if key in parents:
            return f"its deep copy holds the original {type_name(item)}"
        if isinstance(item, _OS_HANDLES):
            return f"its deep copy holds {type_name(item)}, the original's OS resource opened again"
    return None


def type_name(value: Any) -> str:
    """The name of ``value``'s type, bounded, never raising (a failure path names what it met by it)."""
    try:
        return safe_text(type(value).__name__, 80)
    except BaseException:  # noqa: BLE001 - a hostile metaclass
        return "Exception"


def _holds_same(copied: Any, original: Any, depth: int = 0) -> bool:
    """Whether a deep copy still holds what ``original`` holds (objects without ``__eq__`` by their fields)."""
    if copied is original:
        return True
    kind = type(copied)
    if kind is not type(original):
        return False
    try:
        if depth > 64:  # deeper than any state a model reads: plain equality, or a change
            return bool((copied == original) is True)
        if isinstance(copied, dict):
            return copied.keys() == original.keys() and all(
                _holds_same(copied[k], original[k], depth + 1) for k in copied)
        if isinstance(copied, (list, tuple)):
            return len(copied) == len(original) and all(
                _holds_same(a, b, depth + 1) for a, b in zip(copied, original, strict=True))
        if (hasattr(copied, "__dict__") or hasattr(kind, "__slots__")) and all(
                "__eq__" not in vars(c) for c in kind.__mro__[:-1]):
            # What its deep copy copied: ``__dict__`` and ``__slots__`` alike (or the class's own state).
            return _holds_same(copied.__getstate__(), original.__getstate__(), depth + 1)
        # `is True` treats an ambiguous comparison (an array, say) as a change.
        return bool((copied == original) is True)
    except BaseException as exc:  # noqa: BLE001 - an uncomparable value counts as changed, whatever it raised
        if is_real_cancellation(exc):
            raise
        return False


def own_copies(state: Mapping[str, Any], parent: Mapping[str, Any] | None = None
               ) -> tuple[dict[str, Any], dict[str, str]]:
    """``(copies, withheld)``: each shared value of ``state`` deep-copied for the child (each with a fresh memo),
    so nothing a child changes in place reaches the parent. A value that cannot be copied, or whose copy is or
    holds an original (a client whose ``__deepcopy__`` returns itself, another key's object), is never shared
    unless immutable all the way down: ``withheld`` names it with the reason (the record's ``withheld_keys``).
    ``parent``'s other values are originals too."""
    copies: dict[str, Any] = {}
    withheld: dict[str, str] = {}
    code: set[int] = set()
    parents: dict[int, Any] = {}  # everything the parent's values hold: no key's copy may hold any of it
    # Only a fork's history is checked against them: walking the conversation or the ledger on every delegation
    # costs more than the copies (8 ms for a 1,000-record ledger).
    for key, value in (parent or {}).items():
        if key != "messages" and key not in state:
            with contextlib.suppress(Exception):  # a value that cannot be walked is not given to the child anyway
                parents.update(_reachable(value, code))
    to_copy: dict[str, Any] = {}
    for step in ("look", "copy"):
        for key, value in (state.items() if step == "look" else to_copy.items()):
            try:
                if step == "copy":
                    # A deep copy may hand back the original, parts of it or of another key's value (functions,
                    # classes, loggers, an SDK client whose __deepcopy__ returns itself or a registry's object):
                    # that is no copy, and a child would change the parent's.
                    copied = copy.deepcopy(value)
                    if (shared := _shared_with(copied, value, parents, code)) is None:
                        copies[key] = copied
                    else:
                        withheld[safe_text(key, 200)] = f"cannot be copied ({shared})"
                elif key == "messages" or _immutable(value):  # asked of the value too (its class...): may raise
                    copies[key] = value
                else:
                    parents.update(_reachable(value, code))
                    to_copy[key] = value
            except BaseException as exc:  # noqa: BLE001 - any failure to copy withholds the key, never shares it
                # The user's stop goes on: a ``CancelledError`` is the value's (copying is synchronous); a
                # ``KeyboardInterrupt`` is from a signal handler, or on the main thread under the default one.
                if not isinstance(exc, asyncio.CancelledError) and (is_real_cancellation(exc) if not isinstance(
                        exc, KeyboardInterrupt) else from_signal_handler(exc) or (
                        threading.current_thread() is threading.main_thread()
                        and signal.getsignal(signal.SIGINT) is signal.default_int_handler)):
                    raise
                withheld[safe_text(key, 200)] = f"cannot be copied ({type_name(exc)}: {safe_text(exc, 200)})"
    copies = {key: copies[key] for key in state if key in copies}  # the state's order
    if withheld:
        log.warning("state keys not given to a subagent: %s", withheld)
    return copies, withheld


@dataclasses.dataclass(frozen=True)
class ChildInput:
    """What a child starts from: ``inputs`` by reference (what the read-back compares against), ``given`` its
    own copies, ``withheld`` the keys that could not be copied; ``inherited_tokens`` is set for a fork."""

    inputs: dict[str, Any]
    given: dict[str, Any]
    withheld: dict[str, str] = dataclasses.field(default_factory=dict)
    inherited_tokens: int | None = None

    @classmethod
    def of(cls, parent_state: Mapping[str, Any], description: str, blocked: frozenset[str], *,
           fork: bool, tool_call_id: str | None) -> ChildInput:
        inherited = None
        if fork:
            inputs, inherited = forked_input(parent_state, description, blocked, tool_call_id)
        else:
            inputs = child_input(parent_state, description, blocked)
        given, withheld = own_copies(inputs)
        if withheld:  # what the child never saw is not what its output is judged against
            inputs = {k: v for k, v in inputs.items() if k in given}
        return cls(inputs, given, withheld, inherited)


def changed_keys(child_output: Mapping[str, Any], child_inputs: Mapping[str, Any], blocked: frozenset[str],
                 given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Keys the child changed (their final values), judged against the parent's ``child_inputs``; a value
    kept from ``given`` is compared structurally (a copy without ``__eq__`` is no change)."""
    return {k: v for k, v in child_output.items() if k not in blocked and not _unchanged(k, v, child_inputs, given)}


def _unchanged(key: str, value: Any, inputs: Mapping[str, Any], given: Mapping[str, Any] | None = None) -> bool:
    if key not in inputs:
        return False
    before = inputs[key]
    if value is before:
        return True
    if given is not None and key in given and value is given[key]:
        return _holds_same(value, before)
    try:
        # `is True` treats an ambiguous comparison (an array, say) as a change.
        return bool((value == before) is True)
    except BaseException as exc:  # noqa: BLE001 - an uncomparable value counts as changed, whatever it raised
        if is_real_cancellation(exc):
            raise
        return False


# -- A fork (``context="fork"``) starts from the parent's messages before the one holding the pending ``task``
# call, then the task; every other boundary rule holds. Its record's ``inherited_tokens`` sizes that history.

ContextMode = Literal["isolated", "fork"]
"""``isolated`` (the default): the child sees only the task; ``fork``: the conversation too."""


def fork_history(messages: Sequence[Any], tool_call_id: str | None) -> list[BaseMessage]:
    """The parent's conversation as a fork inherits it: everything before the assistant message holding
    ``tool_call_id`` (else before a trailing one with tool calls), without system messages, shallow copies."""
    history = [m for m in messages if isinstance(m, BaseMessage)]
    cut = next((i for i, m in reversed(list(enumerate(history))) if tool_call_id and isinstance(m, AIMessage)
                and any(c.get("id") == tool_call_id for c in m.tool_calls)), None)
    if cut is None and history and isinstance(history[-1], AIMessage) and history[-1].tool_calls:
        cut = len(history) - 1
    if cut is not None:
        history = history[:cut]
    return [m.model_copy() for m in history if not isinstance(m, SystemMessage)]


def forked_input(parent_state: Mapping[str, Any], description: str, blocked: frozenset[str], tool_call_id: str | None
                ) -> tuple[dict[str, Any], int]:
    """A fork child's initial state (only ``messages`` differs from an isolated one's) and its token estimate."""
    # The child's own copies, by the copy rule (own_copies): a middleware editing a message in place edits its own.
    history = fork_history(parent_state.get("messages") or (), tool_call_id)
    copied, withheld = own_copies({"history": history}, parent_state)
    if withheld:  # never shared instead: the delegation fails, naming what could not be copied
        raise SubagentsError(f"the conversation a fork inherits ('messages') {withheld['history']}: a message "
                             "holds a value that cannot be copied (an artifact holding a lock, a client or a "
                             "function, say)")
    history = copied["history"]
    state = {k: v for k, v in parent_state.items() if k not in blocked}
    state["messages"] = [*history, HumanMessage(content=description)]
    return state, count_tokens_approximately(history) if history else 0


# -- One level of delegation, by independent defences: the builder drops forbidden tools and delegating
# middleware from a child; :class:`OneLevelGuard` removes them and any ``<available_agents>`` block from every
# model request and refuses their calls; the runner refuses a ``task`` call made inside a running child. The names
# are this library's, deepagents' and Claude Code's delegation, planning and memory tools.

DELEGATION_TOOL_NAMES: frozenset[str] = frozenset({
    "task", "start_async_task", "check_async_task", "update_async_task", "cancel_async_task", "list_async_tasks",
    "retry_async_task", "create_subagent"})
TODO_TOOL_NAMES: frozenset[str] = frozenset({"write_todos", "read_todos"})
MEMORY_TOOL_NAMES: frozenset[str] = frozenset({"memory", "save_memory", "read_memory", "update_memory",
                                                "delete_memory"})
FORBIDDEN_TOOL_NAMES: frozenset[str] = DELEGATION_TOOL_NAMES | TODO_TOOL_NAMES | MEMORY_TOOL_NAMES
"""Tool names a child never holds."""

DELEGATION_TOOL_TAG = "delegation"
"""A tool whose ``metadata`` has this key set is forbidden to children too."""

# An opening or closing tag in any case, with spaces or attributes (bounded, so a scan stays linear).
_AGENTS_TAG = re.compile(r"<\s*(?:(/)\s*)?available_agents\b[^<>]{0,200}>", re.IGNORECASE)


def tool_name(tool: Any) -> str:
    """The name a tool is called by, for tools, functions and dict schemas."""
    if isinstance(tool, dict):
        return str(tool.get("name") or tool.get("function", {}).get("name", ""))
    return str(getattr(tool, "name", None) or getattr(tool, "__name__", ""))


def is_forbidden_tool(tool: Any) -> bool:
    """Whether a child may never hold this tool."""
    if tool_name(tool) in FORBIDDEN_TOOL_NAMES:
        return True
    metadata = getattr(tool, "metadata", None) or {}
    return bool(metadata.get(DELEGATION_TOOL_TAG))


def child_tools(allowed: Sequence[Any] | None, denied: Iterable[str], parent_tools: Sequence[Any], *,
                on_unknown: Callable[[str, list[str]], None]) -> list[Any]:
    """The tools a child holds: its allow list (or the parent's tools), minus denied and forbidden ones; a
    name the parent lacks is told to ``on_unknown(name, available names)`` (a forbidden one is dropped)."""
    by_name = {tool_name(t): t for t in parent_tools}
    if allowed is None:
        chosen = list(parent_tools)
    else:
        chosen = []
        for item in allowed:
            if not isinstance(item, str):
                chosen.append(item)
            elif item in by_name:
                chosen.append(by_name[item])
            elif not is_forbidden_tool({"name": item}):
                on_unknown(item, sorted(by_name))
    refused = set(denied)
    return [t for t in chosen if tool_name(t) not in refused and not is_forbidden_tool(t)]


def is_delegating_middleware(middleware: Any) -> bool:
    """Whether a middleware gives its agent a way to delegate: its policy says so, or it brings a delegating tool."""
    return policy_of(middleware).delegates or any(is_forbidden_tool(t) for t in getattr(middleware, "tools", ()) or ())


def strip_agents_block(text: str) -> str:
    """Remove every ``<available_agents>`` block from a prompt, however it is spelled (nested blocks go
    whole; a block never closed takes the rest of the prompt, a stray closing tag goes too)."""
    while "available_agents" in text.lower() and _AGENTS_TAG.search(text):  # again: what is left may join a tag
        kept, depth, start = [], 0, 0
        for tag in _AGENTS_TAG.finditer(text):  # one pass: nesting is counted, not re-matched
            if depth == 0:
                kept.append(text[start:tag.start()])
            depth = max(0, depth - 1) if tag.group(1) else depth + 1
            start = tag.end()
        if depth == 0:
            kept.append(text[start:])
        text = "\n\n".join(part.strip() for part in kept if part.strip())
    return text


def without_agents_block(system: SystemMessage) -> SystemMessage:
    """``system`` with every ``<available_agents>`` block removed, each content block cleaned on its own (so
    ``cache_control`` survives); a block spanning several is found in the joined text, then flattened."""
    if isinstance(system.content, str):
        return system.model_copy(update={"content": strip_agents_block(system.content)})
    blocks: list[str | dict[str, Any]] = []
    for block in system.content:
        if isinstance(block, str):
            block = strip_agents_block(block)
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            block = {**block, "text": strip_agents_block(block["text"])}
        if block and not (isinstance(block, dict) and block.get("type") == "text" and not block.get("text")):
            blocks.append(block)
    cleaned = system.model_copy(update={"content": blocks})
    if "available_agents" in cleaned.text.lower() and _AGENTS_TAG.search(cleaned.text):
        return SystemMessage(content=strip_agents_block(system.text))
    return cleaned


class OneLevelGuard(ModelCallPlan, AgentMiddleware):
    """Keeps delegation out of a child at every model and tool call."""

    name = "OneLevelGuard"
    child_policy = ChildPolicy(keeps_model=True, model_call_only=True)

    def model_plan(self, request: Any) -> Generator[Any, Any, Any]:
        tools = [t for t in request.tools if not is_forbidden_tool(t)]
        overrides: dict[str, Any] = {}
        if len(tools) != len(request.tools):
            overrides["tools"] = tools
        system = request.system_message
        if system is not None and "available_agents" in system.text.lower():
            overrides["system_message"] = without_agents_block(system)
        return (yield request.override(**overrides) if overrides else request)


def refusal(request: Any) -> ToolMessage | None:
    """The error a child's call to a forbidden tool gets instead of running; ``None`` for any other call."""
    call = request.tool_call
    if call["name"] in FORBIDDEN_TOOL_NAMES or (request.tool is not None and is_forbidden_tool(request.tool)):
        return ToolMessage(content=f"Tool '{call['name']}' is not available to a subagent: subagents cannot delegate. "
                           "Do the work yourself.", tool_call_id=call["id"], name=call["name"], status="error")
    return None


class OneLevelToolRefusal(AgentMiddleware):
    """A child's outermost tool-call wrap: a forbidden call is refused before any other middleware sees it
    (:class:`OneLevelToolGuard` is innermost, and a spec's middleware could answer a call first)."""

    name = "OneLevelToolRefusal"

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
                      ) -> ToolMessage | Command[Any]:
        return refusal(request) or handler(request)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
    ) -> ToolMessage | Command[Any]:
        return refusal(request) or await handler(request)


class OneLevelToolGuard(OneLevelGuard, OneLevelToolRefusal):
    """The guard for a child that has tools (a toolless one gets :class:`OneLevelGuard`: no empty tools node)."""

    name = "OneLevelToolGuard"
    child_policy = ChildPolicy(keeps_model=True)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
    ) -> ToolMessage | Command[Any]:
        # On this path a sync tool would run on the loop's default executor, which the parent needs.
        return refusal(request) or await handler(on_child_threads(request))


# -- A built child's sync function tools, on ``ainvoke``, run on :data:`CHILD_TOOL_THREADS`, not the loop's
# default executor (children blocked there would starve their parent), each call holding a share of its
# task's slot until it returns (a thread cannot be stopped). On ``invoke`` they run on the child's thread.

CHILD_TOOL_THREADS = ThreadPoolExecutor(max_workers=min(32, (os.cpu_count() or 1) + 4),
                                        thread_name_prefix="subagent-tool")
"""The pool children's sync tools run on under ``ainvoke`` (as large as asyncio's default one)."""


class WorkHolder(Protocol):
    """What a child's work holds while it runs: the runner's slot under the concurrency cap."""

    def share(self) -> None: ...
    def release(self) -> None: ...


SLOT: contextvars.ContextVar[WorkHolder | None] = contextvars.ContextVar("subagent_slot", default=None)
"""The place the work running here holds (set by :func:`running_in`), or ``None`` outside any."""
_POOLED: dict[int, tuple[Any, Any]] = {}
_POOLED_LOCK = threading.Lock()
_POOLED_MAX = 4096


@contextlib.contextmanager
def running_in(slot: WorkHolder) -> Iterator[None]:
    """Tasks created inside this block (a child's ``ainvoke``) charge their sync tools to ``slot``."""
    token = SLOT.set(slot)
    try:
        yield
    finally:
        SLOT.reset(token)


def on_child_threads(request: Any) -> Any:
    """``request`` with its tool moved to the children's pool when it is a sync function tool."""
    tool = request.tool
    entry = _POOLED.get(id(tool))
    if entry is None or entry[0] is not tool:
        entry = (tool, _copy_on_pool(tool))  # the tool itself is kept: its id cannot be reused meanwhile
        with _POOLED_LOCK:
            if len(_POOLED) >= _POOLED_MAX:  # tools made per call (a middleware's): never a leak
                _POOLED.clear()
            _POOLED[id(tool)] = entry
    return request if entry[1] is None else request.override(tool=entry[1])


async def held_until_it_returns(call: Awaitable[Any]) -> Any:
    """Await ``call`` (work on a thread) as its own task, which a cancellation of the caller does not end: it
    holds a share of the task's place until its thread returns, so what it spent reaches the budget."""
    slot = SLOT.get()
    task = asyncio.ensure_future(call)
    if slot is not None:
        slot.share()
    task.add_done_callback(functools.partial(call_returned, slot))
    return await asyncio.shield(task)


class HeldModelCalls(AgentMiddleware):
    """A child's model calls that run on a thread outlive a cancelled child (see :func:`held_until_it_returns`),
    for a child whose model has no async code of its own; it changes nothing in the request."""

    name = "HeldModelCalls"
    child_policy = ChildPolicy(keeps_model=True, model_call_only=True, request_neutral=True)

    def wrap_model_call(self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
                       ) -> ModelCallResult[Any]:
        return handler(request)  # on invoke the child's thread is the call's: the task's place follows it

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> ModelCallResult[Any]:
        return cast("ModelResponse[Any]", await held_until_it_returns(handler(request)))


def call_returned(slot: WorkHolder | None, task: asyncio.Future[Any]) -> None:
    """Done: ``slot``'s share is given back, and the task's error read (an abandoned one's is not "never retrieved")."""
    if slot is not None:
        slot.release()
    if not task.cancelled():
        task.exception()


def _copy_on_pool(tool: Any) -> Any:
    """A copy of a sync-only function tool whose coroutine runs its function on the pool; else ``None``."""
    if type(tool) not in (StructuredTool, Tool) or tool.coroutine is not None or tool.func is None:
        return None
    # A function that takes LangChain's callbacks would get the async manager on this path: left alone.
    try:
        if "callbacks" in inspect.signature(tool.func).parameters:
            return None
    except (TypeError, ValueError):
        return None
    func = tool.func

    @functools.wraps(func)
    async def on_pool(*args: Any, **kwargs: Any) -> Any:
        slot = SLOT.get()
        context = contextvars.copy_context()
        future = CHILD_TOOL_THREADS.submit(context.run, _call, func, args, kwargs)
        if slot is not None:
            slot.share()
            future.add_done_callback(lambda _: slot.release())
        return await asyncio.wrap_future(future)

    return tool.model_copy(update={"coroutine": on_pool})


def _call(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        return func(*args, **kwargs)
    # Neither can leave the thread as itself: a StopIteration set on a future hangs it, and a GeneratorExit
    # would close the tool task's whole chain of awaits (as Python wraps a StopIteration leaving a coroutine).
    except (StopIteration, GeneratorExit) as exc:
        raise RuntimeError from exc


# -- A declarative child's state schema: the parent's minus excluded and private keys, plus what each tool's
# ``ToolRuntime[Context, SomeState]`` declares (an inherited ``write_file`` needs ``files``).


def tool_state_schema(tool: Any) -> type | None:
    """The state type a tool's ``ToolRuntime`` parameter declares, if any."""
    from langchain.tools import ToolRuntime

    for func in (getattr(tool, "func", None), getattr(tool, "coroutine", None), tool):
        if not callable(func) or isinstance(func, type):
            continue
        try:
            hints = get_type_hints(inspect.unwrap(func), include_extras=True)
        except Exception:  # noqa: BLE001 - an unresolvable hint declares nothing
            continue
        for hint in hints.values():
            origin = get_origin(hint)
            if isinstance(origin, type) and issubclass(origin, ToolRuntime):
                args = get_args(hint)
                if len(args) > 1 and _is_schema(args[1]):
                    return cast("type", args[1])
    return None


def child_state_schema(
    tools: Iterable[Any], *, parent_schemas: Sequence[Any] = (), excluded: frozenset[str] = frozenset()
) -> type | None:
    """A ``TypedDict`` for the child's graph, or ``None`` when it needs no extra keys."""
    schemas = [s for s in parent_schemas if _is_schema(s)]
    schemas += [s for s in (tool_state_schema(t) for t in tools) if s is not None]
    if not schemas:
        return None
    base = _hints(AgentState)
    blocked = CORE_EXCLUDED_KEYS | excluded | private_state_keys(types.SimpleNamespace(state_schema=s) for s in schemas)
    extra: dict[str, Any] = {}
    for schema in schemas:
        for key, hint in _hints(schema).items():
            if key not in base and key not in blocked:
                extra.setdefault(key, hint)
    if not extra:
        return None
    return cast("type", TypedDict("SubagentState", {**base, **extra}))  # type: ignore[operator]


def _is_schema(value: Any) -> bool:
    return isinstance(value, type) and bool(getattr(value, "__annotations__", None))


def _hints(schema: Any) -> dict[str, Any]:
    try:
        return get_type_hints(schema, include_extras=True)
    except Exception:  # noqa: BLE001 - an unresolvable schema adds (or marks private) nothing
        return {}


def parent_state_schemas(state_schema: Any, middleware: Iterable[Any]) -> tuple[Any, ...]:
    """The parent's state schemas: its own ``state_schema`` and each middleware's."""
    found = [state_schema] + [getattr(mw, "state_schema", None) for mw in middleware]
    return tuple(s for s in found if _is_schema(s))


_MISSING = object()


# Two LangGraph internals with no public twin (docs/layout.md lists them): each raises when LangGraph changes it,
# never guesses (a guess would write back the wrong keys, or read the wrong checkpoint).


def parent_channels(config: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The parent's state channels, or ``None`` outside a LangGraph run; read as LangGraph's ``ToolNode`` does
    (the task's reader is ``functools.partial(local_read, scratchpad, channels, ...)``)."""
    from langgraph._internal._constants import CONFIG_KEY_READ
    from langgraph.constants import CONF

    read = (config.get(CONF) or {}).get(CONFIG_KEY_READ)
    if read is None:  # a tool called directly: every key is treated as plain
        return None
    args: tuple[Any, ...] = tuple(getattr(read, "args", ()))
    if len(args) < 2 or not isinstance(args[1], Mapping):
        raise SubagentsError("LangGraph's state reader no longer holds the graph's channels as its second "
                             "argument: the write-back rule cannot see the parent's reducers")
    return cast("Mapping[str, Any]", args[1])


def graph_namespace(checkpoint_ns: str, task_id: str) -> str:
    """The namespace of the graph a task runs in: the task's own is it, then ``|<node>:<task id>``."""
    graph, _, own = checkpoint_ns.rpartition("|")
    if not own.endswith(f":{task_id}"):
        raise SubagentsError(f"LangGraph's checkpoint namespace {safe_text(checkpoint_ns, 200)!r} no longer "
                             f"ends in '<node>:<task id>' (task {safe_text(task_id, 80)!r}): its graph's is unknown")
    return graph


def write_back(changes: Mapping[str, Any], inputs: Mapping[str, Any], channels: Mapping[str, Any] | None, *,
               parallel: bool, earlier: Mapping[str, list[Any]] | None = None, checkpointed: bool = False
              ) -> tuple[dict[str, Any], dict[str, str]]:
    """``(update, skipped)``: what to write into the parent, and what not, with why. ``channels=None``: every
    key is plain; ``earlier``: what parallel siblings wrote to each key, tried together so no combination fails
    the reducer; ``checkpointed``: values must also serialize."""
    update: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for key, value in changes.items():
        try:
            reason = _one(key, value, inputs, channels, parallel, update, (earlier or {}).get(key, []),
                          checkpointed)
        except BaseException as exc:  # noqa: BLE001 - a hostile value is skipped, never a crash
            if is_real_cancellation(exc):
                raise
            reason = f"could not be compared or copied ({type_name(exc)})"
        if reason is not None:
            skipped[safe_text(key, 200)] = reason
    return update, skipped


def _one(key: str, value: Any, inputs: Mapping[str, Any], channels: Mapping[str, Any] | None,
         parallel: bool, update: dict[str, Any], earlier: list[Any], checkpointed: bool) -> str | None:
    from langgraph.channels import BinaryOperatorAggregate, Topic

    channel = None if channels is None else channels.get(key)
    if channels is not None and channel is None:
        return "the parent's state has no such key"
    if isinstance(channel, (BinaryOperatorAggregate, Topic)):
        before = inputs.get(key, _MISSING)
        delta = contribution(before, value)
        if delta is _MISSING:
            return "the child replaced a value that has a reducer; only additions can be written back"
        gone = [safe_text(k, 60) for k in before if k not in value] if isinstance(before, Mapping) and isinstance(
            value, Mapping) else []
        note = (f"entries removed by the child cannot be written back through a reducer: {', '.join(gone[:10])}"
                + (" ..." if len(gone) > 10 else "")) if gone else None
    else:
        if parallel:
            return ("no reducer, and the task call had parallel task siblings: only a lone task call writes back "
                    "keys without a reducer")
        delta, note = value, None
    delta, problem = _carried(delta, checkpointed)
    if problem is not None:
        return problem
    if channel is not None and not _accepts(channel, [*earlier, delta]):
        return "the parent's channel rejected the value" + (" together with a parallel sibling's" if earlier else "")
    update[key] = delta
    return note


def _carried(value: Any, checkpointed: bool) -> tuple[Any, str | None]:
    """``(our copy of value, None)`` for the parent to carry, or ``(value, why it cannot)``. LangGraph deep-copies
    a tool's update (our copy, not the child's): a value whose copy works once (or is itself), then raises, fails."""
    try:
        copied = copy.deepcopy(copy.deepcopy(value))
    except BaseException as exc:  # noqa: BLE001 - any type: a value whose copy raises is skipped
        if is_real_cancellation(exc):
            raise
        return value, f"the value cannot be copied ({type_name(exc)})"
    if checkpointed:
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

        try:
            JsonPlusSerializer().dumps_typed(copied)
        except BaseException as exc:  # noqa: BLE001
            if is_real_cancellation(exc):
                raise
            return value, f"the parent's checkpointer cannot store the value ({type_name(exc)})"
    return copied, None


def contribution(before: Any, after: Any) -> Any:
    """What the child added to a reducer value, or ``_MISSING`` when it is not an addition."""
    if before is _MISSING or before is None:
        return after
    if isinstance(before, list) and isinstance(after, list):
        head = after[: len(before)]
        if len(head) == len(before) and all(a is b or a == b for a, b in zip(head, before, strict=True)):
            return after[len(before):]
        return _MISSING
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        return {k: v for k, v in after.items() if k not in before or not (before[k] is v or (before[k] == v) is True)}
    if isinstance(before, (set, frozenset)) and isinstance(after, (set, frozenset)):
        return type(after)(after - before) if before <= after else _MISSING
    return _MISSING


def _accepts(channel: Any, values: list[Any]) -> bool:
    try:
        trial = channel.copy()
        if hasattr(trial, "value"):
            # A reducer that mutates in place must not touch the parent's real value.
            trial.value = copy.copy(trial.value)
        trial.update(values)
    except BaseException as exc:  # noqa: BLE001 - the reducer or type check refused it, with any type
        if is_real_cancellation(exc):
            raise
        return False
    return True


def with_text_appended(system: SystemMessage | str | None, text: str) -> SystemMessage:
    """``system`` with ``text`` after it: plain text stays plain (some servers take only strings); content
    blocks are kept, with their provider fields such as ``cache_control``, and gain a text block."""
    if system is None or system == "":
        return SystemMessage(content=text)
    if isinstance(system, str):
        return SystemMessage(content=f"{system}\n\n{text}")
    if isinstance(system.content, str):
        return system.model_copy(update={"content": f"{system.content}\n\n{text}" if system.content else text})
    blocks: list[str | dict[str, Any]] = [*system.content, {"type": "text", "text": f"\n\n{text}"}]
    return system.model_copy(update={"content": blocks})


# Every model call appends the same block to the same system message: made once. Only a plain-text one, by
# identity (its text too); a list of content blocks could be edited in place by a later middleware.
_appended: dict[tuple[int, int, str], tuple[SystemMessage, str, SystemMessage, str]] = {}


def with_prompt_block(request: ModelRequest[ContextT], block: str) -> ModelRequest[ContextT]:
    """The model request with ``block`` appended to its system message (see :func:`with_text_appended`)."""
    system = request.system_message
    if not block or not isinstance(system, SystemMessage) or not isinstance(system.content, str):
        return request.override(system_message=with_text_appended(system, block)) if block else request
    key = (id(system), id(system.content), block)
    found = _appended.get(key)
    if found is None or found[0] is not system or found[1] is not system.content or found[2].content is not found[3]:
        found = (system, system.content, made := with_text_appended(system, block), cast(str, made.content))
        if len(_appended) >= 64:  # a few agents' prompts in one process; many only when prompts change per call
            _appended.clear()
        _appended[key] = found
    return request.override(system_message=found[2])
