"""Every error and warning the library raises, under one base: :class:`SubagentsError`.

Each class keeps the built-in base a caller may already catch (:class:`SpecError` is a ``ValueError``...) and
carries its figures as fields (:attr:`TaskTimeout.timeout_s`...), so code reads them, never the message. User
data in messages is bounded by :func:`brief`; url credentials are hidden by :func:`redact_url`.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import reprlib
import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml

from subagents._exports import publish

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxtuple, _REPR.maxset = 3, 4, 6, 6, 6
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = 60, 60, 40


def brief(value: Any, limit: int = 100) -> str:
    """A short ``repr`` of user data for an error message, bounded in time and length."""
    try:
        text = _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not break the message
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# A remote spec's url may carry a password, which an error text would put into the model's messages and from
# there into checkpoints, records and transcripts: every url reaching text goes through redact_url.
# Greedy up to the last "@" of the authority: a password may itself hold "@".
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^/?#\s]*)@")


def redact_url(text: str) -> str:
    """``text`` with the user information of every url in it replaced by ``***``."""
    # A user name alone is often a token, so it goes too; with a password the user name stays as a clue.
    return _USERINFO.sub(lambda m: f"{m[1]}{m[2].partition(':')[0]}:***@" if ":" in m[2] else f"{m[1]}***@", text)


def nests_deeper(pattern: str, limit: int = 100) -> bool:
    """Whether ``pattern``'s groups nest past ``limit``: compiling them recurses as deep, and a finalizer the garbage
    collector runs down there fails too (an unraisable error), so such a pattern is refused before it is compiled."""
    tokens = re.findall(r"\\.|\[(?:\\.|[^\]])*\]|[()]", pattern)  # an escape and a class hold no group
    return max(itertools.accumulate({"(": 1, ")": -1}.get(token, 0) for token in tokens), default=0) > limit


class SubagentsError(Exception):
    """The base of every error the library raises (:class:`SubagentError`: a running delegation's)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        publish(cls)  # its package's exports are known: a package runs before its modules


publish(SubagentsError)


class SubagentsWarning(SubagentsError, UserWarning):
    """The base of every warning the library issues (``warnings.simplefilter("error", SubagentsWarning)``)."""


class SpecError(SubagentsError, ValueError):
    """A subagent definition, or a setting to build or run subagents, is invalid; the message names which."""


class InvalidArgument(SubagentsError, ValueError):
    """A call's argument has a value the library does not take (definitions and settings raise SpecError)."""


class InvalidArgumentType(SubagentsError, TypeError):
    """An argument of a kind the library does not take (a model that is not a chat model, an unknown keyword)."""


class UnsupportedCall(SubagentsError, RuntimeError):
    """A call the library cannot serve where or when it is made; the message says what to call instead."""


class StoredDataError(SubagentsError, ValueError):
    """Data the library keeps, or reads back, is not of its shape; the message names which, and why."""


class DefinitionFileError(SpecError):
    """A markdown definition file is invalid; ``path`` and ``field`` (as the file spells it) say where."""

    def __init__(self, path: str | Path, message: str, *, field: str | None = None) -> None:
        self.path, self.field, self.reason = str(path), field, message
        where = f"{self.path}: field '{field}'" if field else self.path
        super().__init__(f"{where}: {message}")


class AgentFileError(DefinitionFileError):
    """An agent file (``<name>.md`` with YAML frontmatter) is invalid."""


class SkillFileError(DefinitionFileError):
    """A skill folder's ``SKILL.md`` is invalid."""


class DefinitionFileWarning(SubagentsWarning):
    """A definition loaded, but something in it was ignored or is deprecated."""


StopReason = Literal["completed", "truncated", "max_turns", "timeout", "budget", "recursion", "cancelled",
                     "model_error", "tool_error", "invalid_call", "refused", "error"]
"""Why a delegation ended (each record's ``stop_reason``). ``error``: anything not classified more precisely;
``truncated``: ended on a reply cut at the output token limit, ``completed`` but with an incomplete answer."""


REAL_CANCELLATION = (asyncio.CancelledError, KeyboardInterrupt, SystemExit)
"""What propagates out of a delegation (leaving a ``cancelled`` mark); every other exception is a result. A
``SystemExit`` only when a signal handler raised it; any other (a tool's ``argparse``) is that code's error."""


def from_signal_handler(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by the code of an installed signal handler (the user's exit, not a tool's)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    for signum in signal.valid_signals():
        try:
            handler = signal.getsignal(signum)
        except (OSError, ValueError):
            continue
        if getattr(handler, "__code__", None) is code:
            return True
    return False


def is_real_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is real cancellation, judged by its type (a hostile ``__class__`` cannot lie), and a
    ``SystemExit`` by who raised it: a signal handler (see :data:`REAL_CANCELLATION`)."""
    return issubclass(type(exc), REAL_CANCELLATION) and (not isinstance(exc, SystemExit) or from_signal_handler(exc))


class SubagentError(SubagentsError):
    """Base of every error about a running delegation; ``stop_reason`` (not the message) says what kind."""

    stop_reason: StopReason = "error"

    def __init__(self, message: str = "", *, stop_reason: StopReason | None = None) -> None:
        super().__init__(message)
        if stop_reason is not None:
            self.stop_reason = stop_reason


class TaskTimeout(SubagentError):
    """The spec's ``timeout_s`` passed; ``stalled`` says what held the task past it, if something did."""

    stop_reason: StopReason = "timeout"

    def __init__(self, message: str = "timed out", *, timeout_s: float | None = None,
                 stalled: str | None = None) -> None:
        super().__init__(message)
        self.timeout_s, self.stalled = timeout_s, stalled


class TaskCancelled(SubagentError):
    """The task was cancelled from outside (a background cancel, a shutdown)."""

    stop_reason: StopReason = "cancelled"


class DelegationRefused(SubagentError):
    """The delegation was refused before a child ran (unknown type, budget spent, nesting)."""

    stop_reason: StopReason = "refused"


class ParentWriteRefused(SubagentError):
    """A child tried to write into the parent's state with ``Command.PARENT``."""

    stop_reason: StopReason = "refused"


class MaxTurnsReached(SubagentError):
    """The child asked for one model call more than its ``max_turns``."""

    stop_reason: StopReason = "max_turns"

    def __init__(self, max_turns: int) -> None:
        super().__init__(f"hit its max_turns limit ({max_turns} model calls)")
        self.max_turns = max_turns


class BudgetExceeded(SubagentError):
    """A token or dollar limit is spent: ``limit`` (passed, or about to be), ``spent`` then, ``unit``
    ``"tokens"`` or ``"usd"`` (``None``: unknown)."""

    stop_reason: StopReason = "budget"

    def __init__(self, message: str, *, limit: float | None = None, spent: float | None = None,
                 unit: Literal["tokens", "usd"] | None = None) -> None:
        super().__init__(message)
        self.limit, self.spent, self.unit = limit, spent, unit


class ChildExit(SubagentsError):
    """A child's ``SystemExit`` (not a signal handler's), ``KeyboardInterrupt`` (no Ctrl-C's) or stray
    ``GeneratorExit``: it fails that task alone."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(f"{type(exc).__name__}: {safe_text(exc, 200)}")


class TranscriptUnavailable(SubagentsError, LookupError):
    """A task's transcript cannot be read where its record says; the message says what keeps it next time."""


class TranscriptFileError(TranscriptUnavailable):
    """A JSONL transcript that is not read: not a regular file, or bigger than ``MAX_JSONL_BYTES``."""

    def __init__(self, path: str, reason: str) -> None:
        self.path, self.reason = path, reason
        super().__init__(f"transcript file {path!r}: {reason}")


class UnknownTask(SubagentsError, KeyError):
    """No task (or thread) answers to the id or prefix asked for. Its text is the message, not a repr."""

    __str__ = Exception.__str__


class UnknownSubagent(SubagentsError, LookupError):
    """The requested subagent type is not registered; the message lists the valid ones."""


class DynamicSubagentError(SpecError):
    """A ``create_subagent`` request breaks a rule; the message names the argument."""


class OutputSchemaError(SpecError):
    """A per-call output schema or response format cannot be used; the message says why."""


class OutputSchemaViolation(SubagentsError):
    """The child did not answer in the requested shape after its retries."""

    def __init__(self, schema_name: str, attempts: int, violation: str) -> None:
        self.schema_name, self.attempts, self.violation = schema_name, attempts, violation
        super().__init__(f"its answer did not match output schema {schema_name!r} after {attempts} "
                         f"attempt{'s' if attempts != 1 else ''}: {violation}")


class RemoteConfigError(SpecError):
    """A remote spec cannot be used as configured (say, its ``api_key_env`` is not set)."""


class McpServerError(SubagentsError, RuntimeError):
    """An MCP server failed to start, answer or stay up; ``server`` names it."""

    def __init__(self, server: str, cause: str) -> None:
        self.server, self.cause = server, cause
        super().__init__(f"MCP server '{server}' {cause}")


class RuntimeClosed(SubagentsError, RuntimeError):
    """Work was handed to a background runtime, or a task's MCP sessions, after they closed."""


class RuntimeStalled(RuntimeClosed):
    """The loop began no callback for :data:`STALL_S`, not for want of CPU: code on it blocks. The waiting
    caller is let go; the runtime stays open and answers again once the blocking call returns."""


class StrayExit(SubagentsError, RuntimeError):
    """A ``KeyboardInterrupt`` or ``SystemExit`` raised by code on a background loop (it ends that task only)."""

    def __init__(self, exc: BaseException) -> None:
        try:
            text = str(exc).strip()
        except Exception:  # noqa: BLE001 - describing a failure never fails
            text = ""
        detail = f" ({text[:200]})" if text else ""
        super().__init__(f"{type(exc).__name__}{detail} raised inside a background task; it stopped this task only")


class ServerUnavailable(SubagentsError, ConnectionError):
    """A server at ``url`` did not answer (or is ``skipped`` while its circuit is open) for ``reason``."""

    def __init__(self, url: str, reason: str, retry_in_s: float, *, skipped: bool = False) -> None:
        self.url, self.reason, self.retry_in_s, self.skipped = url, reason, retry_in_s, skipped
        what = "not tried: the server at" if skipped else "could not reach the server at"
        super().__init__(f"{what} {url} ({reason}); next try in {retry_in_s:.1f} s")


class RemoteAnswerError(SubagentsError, ValueError):
    """A server answered with something the library cannot use (a run with no ``run_id``, too many threads)."""


class RemoteStartError(SubagentsError, RuntimeError):
    """A server refused to start a task; the message names the server's url."""

    def __init__(self, url: str, reason: str) -> None:
        self.url, self.reason = url, reason
        super().__init__(f"the server at {url} did not start the task: {reason}")


class UntrustedDataError(SubagentsError, ValueError):
    """Stored state names something to import and call (:class:`subagents.DataOnlySerializer`)."""


class TaskStateError(SubagentsError, ValueError):
    """An operation that does not apply to the task as it stands; the message says why."""


class YAMLBoundError(SubagentsError, yaml.YAMLError):
    """The YAML is too deep, or holds too many values; ``line`` is 0-based or ``None``."""

    def __init__(self, message: str, line: int | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.message, self.line, self.field = message, line, field


class DuplicateKey(SubagentsError, yaml.constructor.ConstructorError):
    def __init__(self, key: str, mark: yaml.Mark) -> None:
        super().__init__(None, None, f"duplicate key '{key[:60]}'", mark)
        self.key = key[:60]


class SharedModelClient(SubagentsWarning):
    """A model's own ``http_async_client`` (one loop at a time) is shared by background children with the parent."""

    def __init__(self, model_type: str) -> None:
        self.model_type = model_type
        super().__init__(f"{model_type} has an http_async_client of the caller's, which background tasks (on a "
                         "loop of their own) share with the parent; give the subagent a model with a client of its own")


class ToolCallsUnsupported(SubagentsWarning):
    """The model's server (llama.cpp with a template that renders no tools) parses no tool call, and
    delegation is left to the model, which can never call ``task``. Issued once per base url."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        super().__init__(f"the model server at {base_url} says it parses no tool calls (its chat template renders "
                         "no tools), so the model cannot call 'task' and nothing will be delegated; pass "
                         "force_delegation=True (delegation by JSON schema), or serve the model with a chat "
                         "template that renders tools")


class ParentPolicyNotInherited(SubagentsWarning):
    """Subagents take the parent's tools, but not its middleware (an approval, a PII policy): LangChain shows
    a middleware no other, so it must be given as ``model_middleware=`` (``[]``: none)."""

    def __init__(self, middleware: str, agents: Sequence[str]) -> None:
        self.middleware, self.agents = middleware, tuple(agents)
        super().__init__(f"{middleware}: subagents {', '.join(map(repr, self.agents))} take this agent's tools, "
                         "but model_middleware= was not given, so an approval (HumanInTheLoopMiddleware) or data "
                         "policy (PIIMiddleware) in the agent's middleware= does not reach them; pass the same "
                         f"list: {middleware}(..., model_middleware=[...]), or model_middleware=[] if it has none")


class SkillFolderWarning(SubagentsWarning):
    """A spec's skill folder does not exist on the local disk: it adds no skills."""


def safe_text(value: object, limit: int = 2_000) -> str:
    """``str(value)``, bounded, and never raising (a hostile ``__str__`` included)."""
    try:
        text = str(value)
    except BaseException:  # noqa: BLE001 - a hostile __str__ must not break the failure path
        try:
            text = f"<{type(value).__name__} whose message cannot be read>"
        except BaseException:  # noqa: BLE001
            text = "<unreadable>"
    if len(text) > limit:
        text = f"{text[:limit]}... [{len(text) - limit} more characters]"
    return text


# Which KeyboardInterrupt is the user's: set by the runner's SIGINT handler, read by the runner and the meter (here,
# below both, so neither imports the other). Cleared when a handler is installed for a new run.
_STOP = threading.Event()


class CtrlCHandler:
    """The base of the library's SIGINT handler (``subagents._runner``'s): what :func:`is_ctrl_c` recognises."""


def is_ctrl_c() -> bool:
    """Whether a ``KeyboardInterrupt`` raised here (this thread, now) may be the user's Ctrl-C. A signal reaches
    the main thread alone, where a handler of ours notes it first (``subagents._runner.request_stop``); under
    another handler, the main thread's cannot be told from code raising it. Any other fails that task alone."""
    return _STOP.is_set() or (threading.current_thread() is threading.main_thread()
                              and not isinstance(signal.getsignal(signal.SIGINT), CtrlCHandler))
