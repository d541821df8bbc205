"""Claude Code hooks as an ``AgentMiddleware``, for a subagent or the root.

Each hook command gets the event as JSON on stdin (``hook_event_name``,
``tool_name``, ``tool_input``, ``tool_use_id``, ``task_id``, ``agent_type``,
``cwd``, and per event ``tool_response``, ``last_message``,
``stop_hook_active``, ``subagent_type``, ``description``, ``status``,
``result``). What its exit code means:

=================  ==========================================================
event              exit 2 (stderr is the text)
=================  ==========================================================
PreToolUse         the call is blocked; the text is the tool result the agent sees
PostToolUse        the text is added to the tool result (the tool already ran)
Stop               the agent is asked to continue with the text (bounded by ``max_turns``)
SubagentStart      cannot block (as in Claude Code): a warning
SubagentStop       the text is added to the delegation's result the parent sees
=================  ==========================================================

Exit 0 proceeds. The exit code is the command's own, as soon as it exits
(a background job it leaves holding its output does not count). Any other
exit code, a timeout (default 60 s; the command's process group is killed)
or a command that cannot start is a non-blocking warning, as in Claude
Code (so a ``PreToolUse`` guard that hangs does not block): logged, and
kept on the tool result's ``additional_kwargs["hook_warnings"]``, so it is
in the transcript. A hook
never raises into the agent. Commands run one after another in the order
given; on ``ainvoke`` they run as asyncio subprocesses, never blocking the
event loop.

Example::

    HookMiddleware({"PreToolUse": [{"matcher": "Bash",
                                    "hooks": [{"type": "command", "command": "./no-rm.sh"}]}]},
                   agent_type="coder")
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Collection, Generator, Mapping
from typing import IO, Any, Literal, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, Runtime, ToolCallRequest
from langchain.agents.middleware.types import hook_config
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Command
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from subagents.definitions.on_host import launch
from subagents.errors import SpecError, brief
from subagents.outcome import stopped_by_limit

# ----------------------------------------------------------------------------
# The ``hooks`` field: Claude Code's hook format, checked when it is loaded.
#
# ::
#
#     hooks:
#       PreToolUse:
#         - matcher: Bash               # a tool name or a regex (Edit|Write); omit or "*" for all
#           hooks:
#             - type: command
#               command: ./hooks/check-bash.sh
#               timeout: 30             # seconds; default 60
#       PostToolUse: [...]
#       Stop: [...]                     # the agent is about to finish
#
# A subagent's hooks take ``PreToolUse``, ``PostToolUse`` and ``Stop``
# (``SubagentStop`` in a subagent's own file means its ``Stop``, as in Claude
# Code). The root (``create_deep_agent(hooks=...)``) also takes
# ``SubagentStart`` and ``SubagentStop``, run around each delegation, whose
# matcher is matched against the subagent type. Any other event name is an
# error naming the event: a hook that is accepted runs.
#
# Example::
#
#     normalize_hooks({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "x"}]}]})
# ----------------------------------------------------------------------------



DEFAULT_HOOK_TIMEOUT_S = 60.0
SUBAGENT_EVENTS = ("PreToolUse", "PostToolUse", "Stop")
ROOT_EVENTS = (*SUBAGENT_EVENTS, "SubagentStart", "SubagentStop")
HookScope = Literal["subagent", "root"]


class HookCommand(BaseModel):
    """One command to run: it reads the event as JSON on stdin."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["command"] = "command"
    command: str = Field(min_length=1)
    timeout: float = Field(default=DEFAULT_HOOK_TIMEOUT_S, gt=0, le=3600)


class HookMatcher(BaseModel):
    """Commands that run for the tools (or subagent types) ``matcher`` matches."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    matcher: str = "*"
    hooks: tuple[HookCommand, ...]

    @field_validator("matcher", mode="before")
    @classmethod
    def _regex(cls, value: Any) -> Any:
        if value is None:
            return "*"
        if isinstance(value, str) and value not in ("", "*"):
            try:
                re.compile(value)
            # re.compile raises more than re.error: OverflowError for a{99999999999},
            # RecursionError for groups nested hundreds deep.
            except (re.error, OverflowError, RecursionError) as exc:
                reason = "it nests too deeply" if isinstance(exc, RecursionError) else str(exc)
                raise SpecError(f"matcher {brief(value)} is not a valid pattern ({reason})") from None
        return value

    def matches(self, name: str) -> bool:
        if self.matcher in ("", "*"):
            return True
        return name == self.matcher or re.fullmatch(self.matcher, name) is not None


def normalize_hooks(value: Any, scope: HookScope = "subagent") -> dict[str, list[dict[str, Any]]] | None:
    """``{event: [matcher dicts]}`` with every field checked; ``ValueError`` names the event."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise SpecError(f"expected a mapping of hook event names (e.g. PreToolUse) to lists, got {brief(value)}")
    events = ROOT_EVENTS if scope == "root" else SUBAGENT_EVENTS
    hooks: dict[str, list[dict[str, Any]]] = {}
    for event, entries in value.items():
        name = "Stop" if scope == "subagent" and event == "SubagentStop" else event
        if name not in events:
            raise SpecError(
                f"unknown hook event {brief(event)}; expected one of {', '.join(events)}"
                + (" (SubagentStart is a root event: create_deep_agent(hooks=...))"
                   if event == "SubagentStart" else "")
            )
        if not isinstance(entries, list):
            raise SpecError(f"event {name}: expected a list of {{matcher, hooks}}, got {brief(entries)}")
        try:
            parsed = [HookMatcher.model_validate(entry).model_dump() for entry in entries]
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            message = str(err["msg"]).removeprefix("Value error, ")
            raise SpecError(f"event {name}: {where or 'entry'}: {message}") from None
        hooks.setdefault(name, []).extend(parsed)
    return hooks


def matchers(hooks: Mapping[str, Any] | None, event: str) -> list[HookMatcher]:
    """The parsed matchers of one event."""
    return [HookMatcher.model_validate(entry) for entry in (hooks or {}).get(event, ())]


# ----------------------------------------------------------------------------
# Running one hook command: the event as JSON on stdin, bounded by its timeout.
#
# The command runs through the shell in its own process group. Its verdict is
# the shell's exit status, taken as soon as the shell exits: output is read for
# :data:`EXIT_GRACE` seconds more and then no longer, so a background job that
# keeps the hook's stdout open neither delays nor changes the verdict. A
# shell still running at its timeout has its process group killed. Only the
# first :data:`MAX_OUTPUT_CHARS` of each stream are kept; the rest is read and
# dropped, so a hook that prints gigabytes neither stalls nor fills memory.
#
# Whatever happens -- the command is missing, crashes, prints gigabytes or
# never ends -- the result is a :class:`HookOutcome`, never an exception, and
# the call returns within about ``timeout`` plus twice the grace.
# :func:`run_hook` blocks its thread; :func:`arun_hook` runs the command as an
# asyncio subprocess and never blocks the event loop. Both drive one
# :class:`_Run`, which holds what they share: the output kept, the clock and
# the verdict. What an outcome *means* is decided in one place,
# :mod:`subagents.definitions.hooks`.
#
# Example::
#
#     outcome = run_hook("./check.sh", {"hook_event_name": "PreToolUse", "tool_name": "Bash"}, 30)
#     outcome.exit_code, outcome.stderr       # (2, 'rm -rf is not allowed')
# ----------------------------------------------------------------------------



MAX_OUTPUT_CHARS = 8000
"""Most characters of a hook's stdout or stderr kept."""

EXIT_GRACE = 0.25
"""Seconds output is still read after the shell exits or is killed.

What a hook wrote before exiting is already in the pipe; this only covers
reading it. Whoever still holds the pipe after that is not waited for.
"""

_KEEP_BYTES = MAX_OUTPUT_CHARS * 4  # UTF-8 needs at most 4 bytes a character
_CHUNK = 1 << 16
_POLL = 0.05  # how often the blocking driver looks for the shell's exit while pipes stay open


@dataclasses.dataclass(frozen=True)
class HookOutcome:
    """How a hook command ended: ``exit_code`` is ``None`` when it timed out or did not start."""

    command: str
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    problem: str | None = None

    def describe(self) -> str:
        """One line for a warning."""
        what = self.problem or f"exited {self.exit_code}"
        detail = f": {self.stderr.strip()[:300]}" if self.stderr.strip() else ""
        return f"hook {self.command[:80]!r} {what}{detail}"


class _Capture:
    """The first bytes of one output stream; later bytes are dropped as they arrive."""

    def __init__(self) -> None:
        self.data = bytearray()

    def feed(self, chunk: bytes) -> None:
        room = _KEEP_BYTES - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")[:MAX_OUTPUT_CHARS]


class _Run:
    """One hook run as both drivers see it: output kept, deadline, kill, verdict."""

    def __init__(self, command: str, timeout: float) -> None:
        self.command, self.timeout = command, timeout
        self.deadline = time.monotonic() + timeout
        self.streams = {1: _Capture(), 2: _Capture()}
        self.killed = False

    def left(self) -> float:
        """Seconds until the timeout (never negative)."""
        return max(0.0, self.deadline - time.monotonic())

    def kill(self, pid: int) -> None:
        """End the shell's process group: its timeout has passed."""
        self.killed = True
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            os.killpg(pid, signal.SIGKILL)

    def outcome(self, returncode: int | None) -> HookOutcome:
        """The verdict: the shell's own exit status, unless it was still running at the timeout."""
        out, err = self.streams[1].text(), self.streams[2].text()
        # A shell that exited on its own just before the kill keeps its status: a guard's
        # exit 2 is never turned into a timeout (which would let the call through).
        if returncode is None or (self.killed and returncode == -signal.SIGKILL):
            return HookOutcome(self.command, None, out, err, problem=f"timed out after {self.timeout:g}s")
        return HookOutcome(self.command, returncode, out, err)


def _payload(event: Mapping[str, Any]) -> bytes:
    return json.dumps(event, default=str).encode("utf-8")


def _could_not_start(command: str, exc: Exception) -> HookOutcome:
    return HookOutcome(command, None, problem=f"could not start ({type(exc).__name__}: {exc})")


def _failed(command: str, exc: BaseException) -> HookOutcome:
    return HookOutcome(command, None, problem=f"failed ({type(exc).__name__})")


# -- blocking: one thread, non-blocking pipes, a selector ---------------------------


SHELL = "/bin/sh"
"""What runs a hook's command (as ``subprocess``'s ``shell=True`` does)."""


def run_hook(command: str, event: Mapping[str, Any], timeout: float) -> HookOutcome:
    """Run ``command`` with ``event`` on stdin; its verdict within about ``timeout`` seconds. Started
    through :func:`~subagents.definitions.on_host.launch`: confined where this process's ``Bash`` is."""
    try:
        with launch([SHELL, "-c", command]) as (argv, env):
            return _run_hook(command, argv, env, event, timeout)
    except Exception as exc:  # noqa: BLE001 - its confinement failed to start or to clean up: a warning
        return _could_not_start(command, exc)


def _run_hook(command: str, argv: list[str], env: dict[str, str] | None, event: Mapping[str, Any],
              timeout: float) -> HookOutcome:
    try:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except Exception as exc:  # noqa: BLE001 - a hook that cannot start is a warning
        return _could_not_start(command, exc)
    run = _Run(command, timeout)
    try:
        _pump(proc, run, _payload(event))
        return run.outcome(_reap(proc, run))
    except BaseException as exc:
        run.kill(proc.pid)
        if not isinstance(exc, Exception):
            raise  # Ctrl-C propagates, after the hook is ended
        return _failed(command, exc)
    finally:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                pipe.close()  # type: ignore[union-attr]


def _pump(proc: subprocess.Popen[bytes], run: _Run, payload: bytes) -> None:
    """Feed stdin and keep output until the pipes close, or a grace after the shell ends."""
    pipes: dict[int, IO[bytes]] = {1: proc.stdout, 2: proc.stderr, 0: proc.stdin}  # type: ignore[dict-item]
    pending = memoryview(payload)
    stop: float | None = None  # when reading ends: a grace after the shell exits or is killed
    with selectors.DefaultSelector() as selector:
        for number, pipe in pipes.items():
            os.set_blocking(pipe.fileno(), False)
            selector.register(pipe, selectors.EVENT_WRITE if number == 0 else selectors.EVENT_READ, number)
        while selector.get_map():
            now = time.monotonic()
            if stop is None and (proc.poll() is not None or now >= run.deadline):
                if proc.returncode is None:
                    run.kill(proc.pid)
                stop = now + EXIT_GRACE
            if stop is not None and now >= stop:
                return
            wake = min(_POLL, (stop if stop is not None else run.deadline) - now)
            for key, _ in selector.select(max(0.0, wake)):
                if key.data == 0:
                    pending = _feed(key.fileobj, pending)  # type: ignore[arg-type]
                    done = not pending
                else:
                    chunk = _read(key.fileobj)  # type: ignore[arg-type]
                    if chunk is None:
                        continue
                    run.streams[key.data].feed(chunk)
                    done = not chunk
                if done:
                    selector.unregister(key.fileobj)
                    with contextlib.suppress(OSError):
                        key.fileobj.close()  # type: ignore[union-attr]


def _feed(pipe: IO[bytes], pending: memoryview) -> memoryview:
    """Write what the pipe takes now; nothing is left to write once the hook stops reading."""
    try:
        return pending[os.write(pipe.fileno(), pending[:_CHUNK]):]
    except BlockingIOError:
        return pending
    except OSError:  # the hook closed its stdin (or exited) without reading it all
        return pending[:0]


def _read(pipe: IO[bytes]) -> bytes | None:
    """A chunk, ``b""`` at end of file, or ``None`` when nothing is there after all."""
    try:
        return os.read(pipe.fileno(), _CHUNK)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def _reap(proc: subprocess.Popen[bytes], run: _Run) -> int | None:
    """The shell's exit status: waited for until the timeout, then killed and waited for briefly."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        return proc.wait(run.left())
    run.kill(proc.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        return proc.wait(EXIT_GRACE)
    return None


# -- asyncio: a subprocess protocol, so nothing waits for the pipes to close ----------


class _Protocol(asyncio.SubprocessProtocol):
    """Keeps output as it arrives and says when the shell has exited.

    ``asyncio.subprocess.Process.wait`` also waits for the pipes to close,
    which a background job can hold open for as long as it likes.
    """

    def __init__(self, run: _Run, loop: asyncio.AbstractEventLoop) -> None:
        self.run = run
        self.exited: asyncio.Future[None] = loop.create_future()
        self.drained: asyncio.Future[None] = loop.create_future()
        self._open = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.run.streams[fd].feed(data if isinstance(data, bytes) else data.encode())

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open and not self.drained.done():
            self.drained.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def arun_hook(command: str, event: Mapping[str, Any], timeout: float) -> HookOutcome:
    """:func:`run_hook` on the running event loop, without blocking it."""
    try:
        with launch([SHELL, "-c", command]) as (argv, env):
            return await _arun_hook(command, argv, env, event, timeout)
    except Exception as exc:  # noqa: BLE001 - as in run_hook
        return _could_not_start(command, exc)


async def _arun_hook(command: str, argv: list[str], env: dict[str, str] | None, event: Mapping[str, Any],
                     timeout: float) -> HookOutcome:
    loop = asyncio.get_running_loop()
    run = _Run(command, timeout)
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _Protocol(run, loop), *argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True)
    except Exception as exc:  # noqa: BLE001
        return _could_not_start(command, exc)
    try:
        stdin = cast(asyncio.WriteTransport, transport.get_pipe_transport(0))
        stdin.write(_payload(event))
        stdin.close()  # after the buffer is written: end of file for the hook
        if not await _within(protocol.exited, run.left()):
            run.kill(transport.get_pid())
            await _within(protocol.exited, EXIT_GRACE)
        await _within(protocol.drained, EXIT_GRACE)
        return run.outcome(transport.get_returncode())
    except BaseException as exc:
        run.kill(transport.get_pid())
        if not isinstance(exc, Exception):
            # cancellation propagates, after the hook is ended (and reaped, if it is quick)
            await asyncio.shield(_within(protocol.exited, EXIT_GRACE))
            raise
        return _failed(command, exc)
    finally:
        transport.close()  # closes the pipes a background job may still hold


async def _within(future: asyncio.Future[None], seconds: float) -> bool:
    """Whether ``future`` is done within ``seconds`` (it is not cancelled if not)."""
    if not future.done():
        await asyncio.wait([future], timeout=seconds)
    return future.done()


log = logging.getLogger(__name__)

TASK_ID_METADATA_KEY = "subagent_task_id"
STOP_HOOK_MARK = "stop_hook"


class _RunCommand:
    """One command the plan wants run: ``(command, event, timeout)``."""

    def __init__(self, command: str, event: dict[str, Any], timeout: float) -> None:
        self.command, self.event, self.timeout = command, event, timeout


class _CallTool:
    """The plan wants the wrapped tool called now."""


Plan = Generator[Any, Any, Any]


class HookMiddleware(AgentMiddleware):
    """Runs the hooks of one agent (see the module docstring for the rules).

    Args:
        hooks: Claude Code's hook mapping (checked again here).
        agent_type: the subagent's name, or ``None`` for the root.
        scope: ``"subagent"`` or ``"root"`` (which events are allowed).
        delegation: the delegation tool's name and the state key its
            records are written under, ``(tool, ledger_key)``, declared by
            the middleware that owns them (``create_deep_agent`` passes
            ``SubAgentMiddleware``'s); ``SubagentStart``/``SubagentStop``
            fire around calls to that tool. ``None``: they never fire.
        also_delegating: the other tools that start child work
            (``start_async_task``, ``retry_async_task``, ``create_subagent``).
            A ``PreToolUse``/``PostToolUse`` matcher that matches the
            delegation tool's name covers them too, so a guard on ``task``
            cannot be walked around by delegating in the background; a
            matcher naming one of them matches that tool alone. Those called
            with a ``subagent_type`` fire ``SubagentStart``; their children's
            ``SubagentStop`` fires when they end (:meth:`background_task_ended`).

    Example::

        HookMiddleware({"PreToolUse": [{"matcher": "task", "hooks": [{"command": "./no-delegation.sh"}]}]},
                       scope="root", delegation=("task", "subagent_tasks"),
                       also_delegating=("start_async_task",))
    """

    def __init__(self, hooks: Mapping[str, Any], *, agent_type: str | None = None,
                 scope: HookScope = "subagent", delegation: tuple[str, str] | None = None,
                 also_delegating: Collection[str] = ()) -> None:
        super().__init__()
        self.hooks = normalize_hooks(hooks, scope) or {}
        self.agent_type = agent_type
        self.delegation = delegation
        self.also_delegating = frozenset(also_delegating) if delegation is not None else frozenset()

    @property
    def name(self) -> str:
        return "HookMiddleware"

    # -- drivers: the plans below are written once -------------------------------

    @staticmethod
    def _drive(plan: Plan, call_tool: Callable[[], Any] | None = None) -> Any:
        try:
            step = next(plan)
            while True:
                if isinstance(step, _CallTool):
                    value = call_tool()  # type: ignore[misc]
                else:
                    value = run_hook(step.command, step.event, step.timeout)
                step = plan.send(value)
        except StopIteration as stop:
            return stop.value

    @staticmethod
    async def _adrive(plan: Plan, call_tool: Callable[[], Awaitable[Any]] | None = None) -> Any:
        try:
            step = next(plan)
            while True:
                if isinstance(step, _CallTool):
                    value = await call_tool()  # type: ignore[misc]
                else:
                    value = await arun_hook(step.command, step.event, step.timeout)
                step = plan.send(value)
        except StopIteration as stop:
            return stop.value

    # -- the hooks of create_agent ------------------------------------------------

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        return cast("ToolMessage | Command[Any]", self._drive(self._tool_plan(request), lambda: handler(request)))

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
    ) -> ToolMessage | Command[Any]:
        result = await self._adrive(self._tool_plan(request), lambda: handler(request))
        return cast("ToolMessage | Command[Any]", result)

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        return cast("dict[str, Any] | None", self._drive(self._stop_plan(state)))

    @hook_config(can_jump_to=["model"])
    async def aafter_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        return cast("dict[str, Any] | None", await self._adrive(self._stop_plan(state)))

    # -- plans -------------------------------------------------------------------

    def _event(self, event: str, subject: str, payload: dict[str, Any], alias: str | None = None) -> Plan:
        """Run every command of ``event`` matching ``subject`` (or ``alias``); return ``(blocks, warnings)``."""
        blocks: list[str] = []
        warnings: list[str] = []
        base = {"hook_event_name": event, "agent_type": self.agent_type, "task_id": _task_id(),
                "cwd": _cwd(), **payload}
        for matcher in matchers(self.hooks, event):
            if not (matcher.matches(subject) or (alias is not None and matcher.matches(alias))):
                continue
            for hook in matcher.hooks:
                outcome: HookOutcome = yield _RunCommand(hook.command, base, hook.timeout)
                if outcome.exit_code == 0:
                    continue
                if outcome.exit_code == 2:
                    blocks.append(outcome.stderr.strip() or f"Blocked by a {event} hook.")
                else:
                    warnings.append(f"{event} {outcome.describe()}")
        for warning in warnings:
            log.warning("%s: %s", self.agent_type or "root", warning)
        return blocks, warnings

    def _tool_plan(self, request: Any) -> Plan:
        call = request.tool_call
        name, args = call["name"], call.get("args") or {}
        notes: list[str] = []
        feedback: list[str] = []
        # A matcher for the delegation tool covers every tool that starts child work.
        alias = self.delegation[0] if self.delegation is not None and name in self.also_delegating else None
        delegating = (self.delegation is not None and name == self.delegation[0]
                      and bool({"SubagentStart", "SubagentStop"} & set(self.hooks)))
        starting = delegating or (alias is not None and "SubagentStart" in self.hooks and "subagent_type" in args)
        blocks, warnings = yield from self._event("PreToolUse", name, {
            "tool_name": name, "tool_input": args, "tool_use_id": call.get("id")}, alias)
        notes += warnings
        if blocks:
            return ToolMessage(content="\n".join(blocks), tool_call_id=call["id"], name=name,
                               status="error", additional_kwargs={"hook_warnings": notes} if notes else {})
        if starting:
            started, warnings = yield from self._event(
                "SubagentStart", str(args.get("subagent_type", "")),
                {"subagent_type": args.get("subagent_type"), "description": args.get("description"),
                 "tool_use_id": call.get("id")})
            notes += warnings + [f"SubagentStart hooks cannot block: {text}" for text in started]
        result = yield _CallTool()
        message = _tool_message(result, call["id"])
        text = message.text if message is not None else ""
        blocks, warnings = yield from self._event("PostToolUse", name, {
            "tool_name": name, "tool_input": args, "tool_use_id": call.get("id"), "tool_response": text}, alias)
        notes += warnings
        feedback += blocks
        if delegating:
            record = _record(result, self.delegation[1] if self.delegation else "")
            blocks, warnings = yield from self._event(
                "SubagentStop", str(args.get("subagent_type", "")),
                {"subagent_type": args.get("subagent_type"), "description": args.get("description"),
                 "tool_use_id": call.get("id"), "task_id": record.get("id"), "status": record.get("status"),
                 "result": text})
            notes += warnings
            feedback += blocks
        elif starting and message is not None and message.status == "error":
            # The background start was refused (an unknown type, a cap): no child will end, so its
            # SubagentStart gets its SubagentStop now.
            blocks, warnings = yield from self._event(
                "SubagentStop", str(args.get("subagent_type", "")),
                {"subagent_type": args.get("subagent_type"), "description": args.get("description"),
                 "tool_use_id": call.get("id"), "task_id": None, "status": "error", "result": text,
                 "background": True})
            notes += warnings
            feedback += blocks
        return _annotate(result, call["id"], notes, feedback)

    async def background_task_ended(self, record: Mapping[str, Any]) -> list[str]:
        """Run ``SubagentStop`` for a background task that has just ended; return the feedback (exit-2 texts).

        ``record`` is the task's ledger record as it ends (``id``,
        ``agent_type``, ``status``, ``result`` or ``error``). The background
        runner calls this before it stores the outcome, so the feedback can
        join the result the parent is told about. Never raises.
        """
        if "SubagentStop" not in self.hooks or self.delegation is None:
            return []
        status = record.get("status")
        outcome = record.get("result") if status == "completed" else record.get("error")
        agent = str(record.get("agent_type") or "")
        plan = self._event("SubagentStop", agent, {
            "subagent_type": agent, "description": record.get("description"),
            "tool_use_id": record.get("tool_call_id"), "task_id": record.get("id"), "status": status,
            "result": outcome or "", "background": True})
        try:
            blocks, _ = await self._adrive(plan)
        except Exception:  # noqa: BLE001 - a hook never fails the task it reports on
            log.exception("SubagentStop hooks failed for background task %s", record.get("id"))
            return []
        return list(blocks)

    def _stop_plan(self, state: Mapping[str, Any]) -> Plan:
        if "Stop" not in self.hooks:
            return None
        messages = list(state.get("messages") or ())
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage) or last.tool_calls or stopped_by_limit(last):
            return None  # a limit's stop is not the agent's to continue: blocking it would loop to the recursion limit
        active = any(isinstance(m, HumanMessage) and m.additional_kwargs.get(STOP_HOOK_MARK) for m in messages)
        blocks, _ = yield from self._event("Stop", "", {"stop_hook_active": active, "last_message": last.text})
        if not blocks:
            return None
        prompt = HumanMessage(content="\n".join(blocks), additional_kwargs={STOP_HOOK_MARK: True})
        return {"messages": [prompt], "jump_to": "model"}


def _task_id() -> str | None:
    try:
        from langgraph.config import get_config

        return (get_config().get("metadata") or {}).get(TASK_ID_METADATA_KEY)
    except Exception:  # noqa: BLE001 - outside a run there is no task
        return None


def _tool_message(result: Any, tool_call_id: str) -> ToolMessage | None:
    if isinstance(result, ToolMessage):
        return result
    if isinstance(result, Command) and isinstance(result.update, Mapping):
        for message in result.update.get("messages") or ():
            if isinstance(message, ToolMessage) and message.tool_call_id == tool_call_id:
                return message
    return None


def _record(result: Any, ledger_key: str) -> dict[str, Any]:
    if isinstance(result, Command) and isinstance(result.update, Mapping):
        for record in (result.update.get(ledger_key) or {}).values():
            return dict(record)
    return {}


def _annotate(result: Any, tool_call_id: str, notes: list[str], feedback: list[str]) -> Any:
    """The tool result with hook feedback appended and warnings kept for the transcript."""
    message = _tool_message(result, tool_call_id)
    if message is None or not (notes or feedback):
        return result
    changed: dict[str, Any] = {}
    if notes:
        changed["additional_kwargs"] = {**message.additional_kwargs,
                                        "hook_warnings": [*message.additional_kwargs.get("hook_warnings", []), *notes]}
    if feedback:
        changed["content"] = f"{message.text}\n\nHook feedback: " + "\n".join(feedback)
    updated = message.model_copy(update=changed)
    if isinstance(result, ToolMessage):
        return updated
    messages = [updated if m is message else m for m in result.update["messages"]]
    return Command(graph=result.graph, update={**result.update, "messages": messages},
                   resume=result.resume, goto=result.goto)


def _cwd() -> str:
    """The working directory for the hook's event, or ``""`` once it is gone (a tool removed it)."""
    try:
        return os.getcwd()
    except OSError:
        return ""
