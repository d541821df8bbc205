"""Claude Code hooks as an ``AgentMiddleware``, for a subagent or the root (the rules: docs/agent-files.md#hooks).
A hook never raises into the agent; a ``PreToolUse`` hook that never ran blocks the call: a guard's silence is not
a verdict."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import logging
import os
import re
import signal
import subprocess
from collections.abc import Awaitable, Callable, Collection, Generator, Mapping
from typing import Any, Literal, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, Runtime, ToolCallRequest
from langchain.agents.middleware.types import hook_config
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.config import get_config
from langgraph.types import Command
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from subagents._errors import SpecError, brief, nests_deeper
from subagents._outcome import TASK_ID_METADATA_KEY, stopped_by_limit
from subagents._plans import adrive, drive
from subagents.definitions._on_host import DID_NOT_START, confinement, launch

# A subagent takes PreToolUse, PostToolUse and Stop (SubagentStop in its own file means its Stop, as in Claude
# Code); the root also SubagentStart and SubagentStop, matched against the subagent type. Any other event is an
# error: a hook that is accepted runs.

DEFAULT_HOOK_TIMEOUT_S = 60.0
SUBAGENT_EVENTS = ("PreToolUse", "PostToolUse", "Stop")
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
                if nests_deeper(value):
                    raise RecursionError
                re.compile(value)
            # re.compile raises more than re.error: OverflowError for a{99999999999},
            # RecursionError for groups nested hundreds deep.
            except (re.error, OverflowError, RecursionError) as exc:
                reason = "it nests too deeply" if isinstance(exc, RecursionError) else str(exc)
                raise SpecError(f"matcher {brief(value)} is not a valid pattern ({reason})") from None
        return value

    def matches(self, name: str) -> bool:
        return self.matcher in ("", "*", name) or re.fullmatch(self.matcher, name) is not None


def normalize_hooks(value: Any, scope: HookScope = "subagent") -> dict[str, list[dict[str, Any]]] | None:
    """``{event: [matcher dicts]}`` with every field checked; ``ValueError`` names the event."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise SpecError(f"expected a mapping of hook event names (e.g. PreToolUse) to lists, got {brief(value)}")
    events = (*SUBAGENT_EVENTS, "SubagentStart", "SubagentStop") if scope == "root" else SUBAGENT_EVENTS
    hooks: dict[str, list[dict[str, Any]]] = {}
    for event, entries in value.items():
        name = "Stop" if scope == "subagent" and event == "SubagentStop" else event
        if name not in events:
            raise SpecError(f"unknown hook event {brief(event)}; expected one of {', '.join(events)}"
                            + (" (SubagentStart is a root event: create_deep_agent(hooks=...))"
                               if event == "SubagentStart" else ""))
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


# Whatever a command does (missing, crashing, printing gigabytes, never ending), the result is a HookOutcome
# within about ``timeout`` plus twice EXIT_GRACE, never an exception.

MAX_OUTPUT_CHARS = 8000  # of a hook's stdout or stderr
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # but newline and tab

EXIT_GRACE = 0.25
"""Seconds output is still read after the shell exits or is killed; whoever still holds the pipe then
(a background job) is not waited for, so it neither delays nor changes the verdict."""


@dataclasses.dataclass(frozen=True)
class HookOutcome:
    """How a hook command ended: ``exit_code`` is ``None`` when it timed out or did not start; ``never_ran``
    when its shell or its sandbox could not start (the launcher's :data:`~subagents.definitions._on_host.DID_NOT_START`,
    never anything the command prints or exits with)."""

    command: str
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    problem: str | None = None
    never_ran: bool = False

    def describe(self) -> str:
        """One line for a warning."""
        what = self.problem or f"exited {self.exit_code}"
        detail = f": {self.stderr.strip()[:300]}" if self.stderr.strip() else ""
        return f"hook {self.command[:80]!r} {what}{detail}"


class _Protocol(asyncio.SubprocessProtocol):
    """Keeps the first bytes of each stream (the rest is read and dropped) and says when the shell exited
    (``asyncio.subprocess.Process.wait`` also waits for the pipes, which a background job can hold open)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.exited: asyncio.Future[None] = loop.create_future()
        self.drained: asyncio.Future[None] = loop.create_future()
        self.output = {1: bytearray(), 2: bytearray()}
        self._open = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        kept = self.output[fd]  # up to 4 bytes a character of the text kept (UTF-8's most)
        kept += (data if isinstance(data, bytes) else data.encode())[:max(0, 4 * MAX_OUTPUT_CHARS - len(kept))]

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open and not self.drained.done():
            self.drained.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def text(self, fd: int) -> str:
        # Shown in warnings, logs and tool results: a control character (a terminal escape sequence clearing the
        # screen or hiding text) is written out, as \x1b, rather than acted on.
        return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}",
                            self.output[fd].decode("utf-8", "replace")[:MAX_OUTPUT_CHARS])


def run_hook(command: str, event: Mapping[str, Any], timeout: float) -> HookOutcome:
    """:func:`arun_hook` from blocking code, on a loop of its own: in this thread (so Ctrl-C ends the
    hook), or on a worker thread when this thread already runs a loop."""

    def run() -> HookOutcome:
        with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:  # the thread's current loop stays
            return runner.run(arun_hook(command, event, timeout))

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result()


async def arun_hook(command: str, event: Mapping[str, Any], timeout: float) -> HookOutcome:
    """Run ``command`` with ``event`` as JSON on stdin, in its own process group; its verdict within about
    ``timeout`` seconds, never blocking the loop. Started through
    :func:`~subagents.definitions._on_host.launch`: confined where this process's ``Bash`` is."""
    try:
        # /bin/sh as subprocess's shell=True, with PYTHONSAFEPATH=1 and an absolute-only PATH
        with launch(["/bin/sh", "-c", command]) as (argv, env):
            return await _arun_hook(command, argv, env, event, timeout)
    except Exception as exc:  # noqa: BLE001 - its confinement failed to start or to clean up: a warning
        return _could_not_start(command, exc)


def _could_not_start(command: str, exc: Exception) -> HookOutcome:
    return HookOutcome(command, None, problem=f"could not start ({type(exc).__name__}: {exc})", never_ran=True)


async def _arun_hook(command: str, argv: list[str], env: dict[str, str] | None, event: Mapping[str, Any],
                     timeout: float) -> HookOutcome:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _Protocol(loop), *argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True)
    except Exception as exc:  # noqa: BLE001 - a hook that cannot start is a warning
        return _could_not_start(command, exc)
    killed = False

    def kill() -> None:
        nonlocal killed
        killed = True
        with contextlib.suppress(OSError):
            os.killpg(transport.get_pid(), signal.SIGKILL)

    try:
        stdin = cast(asyncio.WriteTransport, transport.get_pipe_transport(0))
        stdin.write(json.dumps(event, default=str).encode("utf-8"))
        stdin.close()  # after the buffer is written: end of file for the hook
        if not await _within(protocol.exited, deadline - loop.time()):
            kill()
            await _within(protocol.exited, EXIT_GRACE)
        await _within(protocol.drained, EXIT_GRACE)
        returncode = transport.get_returncode()
        out, err = protocol.text(1), protocol.text(2)
        # A shell that exited on its own just before the kill keeps its status: a guard's
        # exit 2 is never turned into a timeout (which would let the call through).
        if returncode is None or (killed and returncode == -signal.SIGKILL):
            return HookOutcome(command, None, out, err, problem=f"timed out after {timeout:g}s")
        if returncode == -DID_NOT_START and confinement() is not None:
            return HookOutcome(command, None, out, err, problem="could not start in its sandbox", never_ran=True)
        return HookOutcome(command, returncode, out, err)
    except BaseException as exc:
        kill()
        if not isinstance(exc, Exception):
            # cancellation propagates, after the hook is ended (and reaped, if it is quick)
            await asyncio.shield(_within(protocol.exited, EXIT_GRACE))
            raise
        return HookOutcome(command, None, problem=f"failed ({type(exc).__name__})")
    finally:
        transport.close()  # closes the pipes a background job may still hold


async def _within(future: asyncio.Future[None], seconds: float) -> bool:
    """Whether ``future`` is done within ``seconds`` (it is not cancelled if not)."""
    if not future.done():
        await asyncio.wait([future], timeout=max(0.0, seconds))
    return future.done()


log = logging.getLogger(__name__)

STOP_HOOK_MARK = "stop_hook"


Plan = Generator[Any, Any, Any]  # yields ``None`` to call the wrapped tool, ``(command, event, timeout)`` to run one


class HookMiddleware(AgentMiddleware):
    """Runs the hooks of one agent (the rules: docs/agent-files.md#hooks).

    Args:
        hooks: Claude Code's hook mapping (checked again here).
        agent_type: the subagent's name, or ``None`` for the root.
        scope: ``"subagent"`` or ``"root"`` (which events are allowed).
        delegation: ``(tool, ledger_key)``: the delegation tool and the state key of its records;
            ``SubagentStart``/``SubagentStop`` fire around its calls (``None``: never).
        also_delegating: other tools that start child work (``start_async_task``...): a ``PreToolUse`` or
            ``PostToolUse`` matcher of the delegation tool covers them too (no walking around a guard in the
            background); called with a ``subagent_type`` they fire ``SubagentStart``, and their children's
            ``SubagentStop`` fires as they end (:meth:`background_task_ended`).
    """

    name = "HookMiddleware"

    def __init__(self, hooks: Mapping[str, Any], *, agent_type: str | None = None,
                 scope: HookScope = "subagent", delegation: tuple[str, str] | None = None,
                 also_delegating: Collection[str] = ()) -> None:
        super().__init__()
        self.hooks = normalize_hooks(hooks, scope) or {}
        self.agent_type = agent_type
        self.delegation = delegation
        self.also_delegating = frozenset(also_delegating) if delegation is not None else frozenset()

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        return cast("ToolMessage | Command[Any]", drive(self._tool_plan(request), lambda step: handler(request)
                                                        if step is None else run_hook(*step)))

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
    ) -> ToolMessage | Command[Any]:
        return cast("ToolMessage | Command[Any]", await adrive(self._tool_plan(request), lambda step: handler(request)
                                                               if step is None else arun_hook(*step)))

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        return cast("dict[str, Any] | None", drive(self._stop_plan(state), lambda step: run_hook(*step)))

    @hook_config(can_jump_to=["model"])
    async def aafter_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        return cast("dict[str, Any] | None", await adrive(self._stop_plan(state), lambda step: arun_hook(*step)))

    def _event(self, event: str, subject: str, payload: dict[str, Any], alias: str | None = None) -> Plan:
        """Run every command of ``event`` matching ``subject`` (or ``alias``); return ``(blocks, warnings)``."""
        blocks: list[str] = []
        warnings: list[str] = []
        try:
            task_id = (get_config().get("metadata") or {}).get(TASK_ID_METADATA_KEY)
        except Exception:  # noqa: BLE001 - outside a run there is no task
            task_id = None
        try:
            cwd = os.getcwd()
        except OSError:  # gone (a tool removed it): the event says ""
            cwd = ""
        base = {"hook_event_name": event, "agent_type": self.agent_type, "task_id": task_id, "cwd": cwd, **payload}
        for matcher in map(HookMatcher.model_validate, self.hooks.get(event, ())):
            if not (matcher.matches(subject) or (alias is not None and matcher.matches(alias))):
                continue
            for hook in matcher.hooks:
                outcome: HookOutcome = yield hook.command, base, hook.timeout
                if outcome.exit_code == 0:
                    continue
                if outcome.exit_code == 2:
                    blocks.append(outcome.stderr.strip() or f"Blocked by a {event} hook.")
                # A guard that never ran lets nothing through; nor one the shell could not find or run (127, 126).
                elif event == "PreToolUse" and (outcome.never_ran or outcome.exit_code in (126, 127)):
                    blocks.append(f"Blocked: the PreToolUse {outcome.describe()}; the call waits for a guard "
                                  "that runs.")
                else:
                    warnings.append(f"{event} {outcome.describe()}")
        for warning in warnings:
            log.warning("%s: %s", self.agent_type or "root", warning)
        return blocks, warnings

    def _tool_plan(self, request: Any) -> Plan:
        call = request.tool_call
        name, args = call["name"], call.get("args") or {}
        # A matcher for the delegation tool covers every tool that starts child work.
        alias = self.delegation[0] if self.delegation is not None and name in self.also_delegating else None
        delegating = (self.delegation is not None and name == self.delegation[0]
                      and bool({"SubagentStart", "SubagentStop"} & set(self.hooks)))
        starting = delegating or (alias is not None and "SubagentStart" in self.hooks and "subagent_type" in args)
        blocks, warnings = yield from self._event("PreToolUse", name, {
            "tool_name": name, "tool_input": args, "tool_use_id": call.get("id")}, alias)
        notes = list(warnings)
        if blocks:
            return ToolMessage(content="\n".join(blocks), tool_call_id=call["id"], name=name,
                               status="error", additional_kwargs={"hook_warnings": notes} if notes else {})
        subagent = str(args.get("subagent_type", ""))
        who = {"subagent_type": args.get("subagent_type"), "description": args.get("description"),
               "tool_use_id": call.get("id")}
        if starting:
            started, warnings = yield from self._event("SubagentStart", subagent, who)
            notes += warnings + [f"SubagentStart hooks cannot block: {text}" for text in started]
        result = yield None
        update = result.update if isinstance(result, Command) and isinstance(result.update, Mapping) else {}
        message = result if isinstance(result, ToolMessage) else next((m for m in update.get("messages") or () if (
            isinstance(m, ToolMessage) and m.tool_call_id == call["id"])), None)
        text = message.text if message is not None else ""
        blocks, warnings = yield from self._event("PostToolUse", name, {
            "tool_name": name, "tool_input": args, "tool_use_id": call.get("id"), "tool_response": text}, alias)
        notes += warnings
        feedback = list(blocks)
        stop: dict[str, Any] | None = None
        if delegating and self.delegation is not None:
            record = dict(next(iter((update.get(self.delegation[1]) or {}).values()), {}))
            stop = {"task_id": record.get("id"), "status": record.get("status"), "result": text}
        elif starting and message is not None and message.status == "error":
            # The background start was refused (an unknown type, a cap): no child will end, so its
            # SubagentStart gets its SubagentStop now.
            stop = {"task_id": None, "status": "error", "result": text, "background": True}
        if stop is not None:
            blocks, warnings = yield from self._event("SubagentStop", subagent, {**who, **stop})
            notes += warnings
            feedback += blocks
        if message is None or not (notes or feedback):
            return result
        changed: dict[str, Any] = {}  # hook feedback appended, warnings kept for the transcript
        if notes:
            changed["additional_kwargs"] = {**message.additional_kwargs, "hook_warnings": [
                *message.additional_kwargs.get("hook_warnings", []), *notes]}
        if feedback:
            changed["content"] = f"{message.text}\n\nHook feedback: " + "\n".join(feedback)
        updated = message.model_copy(update=changed)
        if isinstance(result, ToolMessage):
            return updated
        messages = [updated if m is message else m for m in result.update["messages"]]
        return Command(graph=result.graph, update={**result.update, "messages": messages},
                       resume=result.resume, goto=result.goto)

    async def background_task_ended(self, record: Mapping[str, Any]) -> list[str]:
        """Run ``SubagentStop`` for a background task's ledger ``record`` as it ends; return the feedback
        (exit-2 texts) to join the result the parent is told about. Never raises."""
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
            blocks, _ = await adrive(plan, lambda step: arun_hook(*step))
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
