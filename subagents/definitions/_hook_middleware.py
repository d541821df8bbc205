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

import logging
import os
from collections.abc import Awaitable, Callable, Generator, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import hook_config
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Command

from subagents.definitions._hook_config import HookScope, matchers, normalize_hooks
from subagents.definitions._hook_runner import HookOutcome, arun_hook, run_hook

log = logging.getLogger(__name__)

TASK_ID_METADATA_KEY = "subagent_task_id"
STOP_HOOK_MARK = "stop_hook"


class _Run:
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
    """

    def __init__(self, hooks: Mapping[str, Any], *, agent_type: str | None = None,
                 scope: HookScope = "subagent", delegation: tuple[str, str] | None = None) -> None:
        super().__init__()
        self.hooks = normalize_hooks(hooks, scope) or {}
        self.agent_type = agent_type
        self.delegation = delegation

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

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self._drive(self._tool_plan(request), lambda: handler(request))

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await self._adrive(self._tool_plan(request), lambda: handler(request))

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: Mapping[str, Any], runtime: Any) -> dict[str, Any] | None:
        return self._drive(self._stop_plan(state))

    @hook_config(can_jump_to=["model"])
    async def aafter_model(self, state: Mapping[str, Any], runtime: Any) -> dict[str, Any] | None:
        return await self._adrive(self._stop_plan(state))

    # -- plans -------------------------------------------------------------------

    def _event(self, event: str, subject: str, payload: dict[str, Any]) -> Plan:
        """Run every matching command of ``event``; return ``(blocking texts, warnings)``."""
        blocks: list[str] = []
        warnings: list[str] = []
        base = {"hook_event_name": event, "agent_type": self.agent_type, "task_id": _task_id(),
                "cwd": _cwd(), **payload}
        for matcher in matchers(self.hooks, event):
            if not matcher.matches(subject):
                continue
            for hook in matcher.hooks:
                outcome: HookOutcome = yield _Run(hook.command, base, hook.timeout)
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
        delegating = (self.delegation is not None and name == self.delegation[0]
                      and bool({"SubagentStart", "SubagentStop"} & set(self.hooks)))
        blocks, warnings = yield from self._event("PreToolUse", name, {
            "tool_name": name, "tool_input": args, "tool_use_id": call.get("id")})
        notes += warnings
        if blocks:
            return ToolMessage(content="\n".join(blocks), tool_call_id=call["id"], name=name,
                               status="error", additional_kwargs={"hook_warnings": notes} if notes else {})
        if delegating:
            started, warnings = yield from self._event(
                "SubagentStart", str(args.get("subagent_type", "")),
                {"subagent_type": args.get("subagent_type"), "description": args.get("description"),
                 "tool_use_id": call.get("id")})
            notes += warnings + [f"SubagentStart hooks cannot block: {text}" for text in started]
        result = yield _CallTool()
        message = _tool_message(result, call["id"])
        text = message.text if message is not None else ""
        blocks, warnings = yield from self._event("PostToolUse", name, {
            "tool_name": name, "tool_input": args, "tool_use_id": call.get("id"), "tool_response": text})
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
        return _annotate(result, call["id"], notes, feedback)

    def _stop_plan(self, state: Mapping[str, Any]) -> Plan:
        if "Stop" not in self.hooks:
            return None
        messages = list(state.get("messages") or ())
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage) or last.tool_calls:
            return None
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
