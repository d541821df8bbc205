"""Limits end a task with an answer: the last call a limit allows is a wrap-up, with no tools.

Every built child has :class:`WrapUp` in its model-call wrap. It reads the
task's meter (:func:`subagents.metering.task_meter`), which knows the turns
used, the time and the budget left, and before each model call:

* adds one line to the system prompt naming the task's limits
  (:meth:`~subagents.metering.TaskMeter.limits_line`);
* when that call is the last one a limit allows
  (:meth:`~subagents.metering.TaskMeter.last_call`: the ``max_turns``-th call;
  less than the wrap-up share of ``timeout_s`` left; a token or dollar limit
  that covers this call but not one more), makes it a wrap-up: no tools
  offered and :data:`WRAP_UP_PROMPT` after the conversation (for that call
  only, as :mod:`subagents.truncation`'s retry asks), so the child answers with what it
  has. A reply that calls a tool anyway has its calls dropped (none runs);
  its text, if any, is the answer.

The runner then records the task as ``completed`` with the limit's
``stop_reason`` and ``partial: true``, and the parent reads the answer after
one line saying it was cut short (:func:`cut_short_note`). A wrap-up that
gives no text fails the task with the limit's error, as without a wrap-up.
The call counts as any other in ``model_calls``, usage and budgets: a budget
is judged with room kept for it, so its bound on overshoot is unchanged.
A compiled subagent (a graph of the caller's) has no such wrap: its limits
end it with an error.

Example::

    SubagentSpec(name="researcher", description="...", max_turns=8)              # on: a share of 0.15
    SubagentSpec(name="researcher", description="...", wrap_up=0.3)             # earlier, for slow tools
    create_deep_agent(model, subagents=specs, wrap_up=False)                     # every limit is an error
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Annotated, Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, StrictBool

from subagents.boundary import with_prompt_block
from subagents.errors import BudgetExceeded, MaxTurnsReached, SubagentError, TaskTimeout
from subagents.metering import prompt_estimate, task_meter
from subagents.plans import adrive, drive

DEFAULT_WRAP_UP_SHARE = 0.15
"""The share of ``timeout_s`` left at which the next model call is the wrap-up: 9s of a 60s task. Enough
for one call of most models, small enough that a task rarely stops early."""

WrapUpSetting = StrictBool | Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)]
"""``True`` (on, with :data:`DEFAULT_WRAP_UP_SHARE`), ``False`` (off: every limit ends a task with an error),
or the share of ``timeout_s`` left at which the wrap-up call is made (above 0, below 1)."""

WRAP_UP_PROMPT = ("Last call: a limit is reached and no tools are left. Give your best final answer now, "
                  "from what you have, and say what is undone.")
"""What the wrap-up call adds after the conversation, as a user's message for that call only."""


def wrap_up_share(own: WrapUpSetting | None, setting: WrapUpSetting) -> float | None:
    """The share a task runs with: its spec's own setting, else the caller's; ``None`` when off."""
    chosen = setting if own is None else own
    if chosen is True:
        return DEFAULT_WRAP_UP_SHARE
    return None if chosen is False else float(chosen)


def cut_short_note(stop: SubagentError) -> str:
    """The one line before a wrap-up's answer in the parent's ``ToolMessage``, naming the limit."""
    if isinstance(stop, MaxTurnsReached):
        limit = f"its model calls (max_turns={stop.max_turns})"
    elif isinstance(stop, TaskTimeout):
        limit = f"its time (timeout_s={stop.timeout_s:g})"
    elif isinstance(stop, BudgetExceeded) and stop.unit == "usd":
        limit = f"dollars (${stop.limit:g})"
    else:
        limit = f"tokens ({stop.limit:g})" if isinstance(stop, BudgetExceeded) and stop.limit else "a limit"
    return (f"[Cut short by its limit on {limit}: below is its best answer with what it had, "
            "given on its last call, without tools. It may be incomplete.]")


class WrapUp(AgentMiddleware):
    """A built child's limits line, and its last call as a wrap-up with no tools (see the module docstring)."""

    model_call_only = True  # joined with neighbouring model-call wraps (subagents.background.runtime)
    keeps_model = True

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        return drive(self._plan(request), handler)

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> ModelResponse[Any]:
        return await adrive(self._plan(request), handler)

    @staticmethod
    def _plan(request: ModelRequest[Any]) -> Generator[ModelRequest[Any], Any, ModelResponse[Any]]:
        meter = task_meter()
        # Not run by the runner, wrap-ups off, or no tools to take away: each call could be the answer already.
        if meter is None or meter.wrap_up_share is None or not request.tools:
            response: ModelResponse[Any] = yield request
            return response
        request = with_prompt_block(request, meter.limits_line())
        # As the meter will estimate the call it sees: the messages, and the tool schemas as they are sent.
        schemas = [t if isinstance(t, dict) else convert_to_openai_tool(t) for t in request.tools]
        estimate = prompt_estimate([request.system_message, *request.messages], {"tools": schemas})
        stop = meter.last_call(estimate, _model_name(request.model))
        if stop is None:
            response = yield request
            return response
        meter.wrapped_up = stop
        # The instruction comes last, as a user's turn for this call only: a small model heeds the end of its
        # prompt, and a system line far above the tool results it just read is easily missed.
        response = yield request.override(messages=[*request.messages, HumanMessage(WRAP_UP_PROMPT)], tools=[],
                                          tool_choice=None)
        return _without_tool_calls(response)


def _model_name(model: Any) -> str | None:
    """The name a model's calls are priced and learned under (its invocation parameters' name)."""
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    return name if isinstance(name, str) and name else None


def _without_tool_calls(response: ModelResponse[Any]) -> ModelResponse[Any]:
    """The wrap-up's reply with any tool call dropped: the limit allows no more steps, so none may run."""
    if response.structured_response is not None:
        return response
    result = [m.model_copy(update={"content": m.text, "tool_calls": [], "invalid_tool_calls": []})
              if isinstance(m, AIMessage) and (m.tool_calls or m.invalid_tool_calls) else m
              for m in response.result]
    return ModelResponse(result=result, structured_response=None)
