"""Counting what a child spends, and stopping it between steps.

A :class:`TaskMeter` rides along in the child's callbacks, so it sees every
model call of any child (a built spec or a caller's compiled graph, and the
model calls its middleware makes, such as a summariser's) without touching
the graph. It counts model calls, tokens and cost, enforces ``max_turns``,
and, because LangChain re-raises errors from handlers marked ``raise_error``,
it stops the child at its next model or tool call once the task's deadline
has passed, the task was cancelled, or a budget is spent. This is also what
ends an abandoned child on the ``invoke`` path, where a running thread cannot
be interrupted from outside.

It also remembers where the last error came from (a model or a tool), so a
failure can be classified by type and origin, never by its message.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult

from subagents._budget import Budget, BudgetExceeded, PriceTable, cost_of, estimate_tokens, token_count
from subagents._errors import StopReason, SubagentError, TaskCancelled, TaskTimeout

_IGNORED_GENERATOR_EXIT = frozenset({"coroutine ignored GeneratorExit", "generator ignored GeneratorExit",
                                     "async generator ignored GeneratorExit"})
"""The interpreter's messages for a ``GeneratorExit`` that a coroutine or generator did not let end it."""


class TaskStopped(SubagentError):
    """Raised inside a child to stop it; the message says why, ``stop_reason`` what kind."""


class MaxTurnsReached(TaskStopped):
    """The child asked for one model call more than its ``max_turns``."""

    stop_reason: StopReason = "max_turns"

    def __init__(self, max_turns: int) -> None:
        super().__init__(f"hit its max_turns limit ({max_turns} model calls)")
        self.max_turns = max_turns


class TaskMeter(BaseCallbackHandler):
    """Per-task usage counter with a deadline, budgets and a stop switch."""

    raise_error = True
    run_inline = True
    # Chain events are by far the most frequent; the meter needs none of them.
    # Tool events are dispatched under LangChain's "agent" switch, so it stays on.
    ignore_chain = True
    ignore_retriever = True

    def __init__(
        self,
        *,
        deadline: float | None = None,
        max_turns: int | None = None,
        max_tokens: int | None = None,
        max_usd: float | None = None,
        prices: PriceTable | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.model_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost_usd = 0.0
        self.deadline = deadline
        self.max_turns = max_turns
        self.max_tokens = max_tokens
        self.max_usd = max_usd
        self.prices = prices
        self.budget = budget
        self._seen: list[tuple[BaseException, StopReason]] = []  # the last few model/tool errors, newest last
        self._raised: list[BaseException] = []  # what this meter raised to stop the child (few: it stops)
        self._stop: SubagentError | None = None
        self._reserved: dict[Any, int] = {}
        self._lock = threading.Lock()

    def stop(self, error: SubagentError) -> None:
        """Make the child raise ``error`` at its next model or tool call."""
        self._stop = error

    def cancel(self) -> None:
        self.stop(TaskCancelled("was cancelled"))

    def carry(self, spent: dict[str, Any]) -> None:
        """Start from what an earlier run of the same task spent (before an approval pause)."""
        with self._lock:
            self.model_calls += token_count(spent.get("model_calls"))
            self.input_tokens += token_count(spent.get("input_tokens"))
            self.output_tokens += token_count(spent.get("output_tokens"))
            self.cost_usd += _dollars(spent.get("cost_usd"))

    def usage(self) -> dict[str, Any]:
        return {
            "model_calls": self.model_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": round(self.cost_usd, 6),
        }

    def source_of(self, exc: BaseException) -> BaseException:
        """The error a model or tool raised that ``exc`` stands in for; ``exc`` itself if none.

        A ``GeneratorExit`` raised by a tool can reach the runner, on
        ``ainvoke``, as the interpreter's ``RuntimeError("coroutine ignored
        GeneratorExit")`` with no link back to it; that error is the latest
        ``GeneratorExit`` this meter saw a model or tool raise. A stop of
        the meter's own that a tool wrapped (``raise ToolError(...) from
        exc``) is that stop: the task's limit, not the tool's failure.
        """
        if type(exc) is RuntimeError and len(exc.args) == 1 and exc.args[0] in _IGNORED_GENERATOR_EXIT:
            return next((seen for seen, _ in reversed(self._seen) if isinstance(seen, GeneratorExit)), exc)
        cause = exc
        for _ in range(8 if self._raised else 0):  # the meter's own stop, wrapped by a tool it passed through
            wrapped = cause.__cause__ or cause.__context__
            if wrapped is None:
                break
            if any(wrapped is raised for raised in self._raised):
                return wrapped
            cause = wrapped
        return exc

    def origin_of(self, exc: BaseException) -> StopReason | None:
        """``model_error`` or ``tool_error`` when ``exc`` is what a model or tool raised."""
        exc = self.source_of(exc)
        if any(exc is raised for raised in self._raised):  # the meter's own stop, passed through a tool
            return None
        # Tools failing in one step: the error that ended the run need not be the latest. An error raised
        # from a tool's (Python's RuntimeError for a StopIteration leaving a generator) comes from the tool.
        for seen, origin in reversed(self._seen):
            if seen is exc or seen is exc.__cause__:
                return origin
        if not self._seen:
            return None
        seen, origin = self._seen[-1]
        # asyncio re-creates a TimeoutError crossing from an executor thread: same type and args.
        try:
            same = type(seen) is type(exc) and seen.args == exc.args
        except Exception:  # noqa: BLE001 - uncomparable args: not the same error
            same = False
        return origin if same else None

    def raise_if_stopped(self) -> None:
        """Raise the meter's own stop (deadline passed, cancelled, budget spent) if there is one now."""
        self._check()

    def _check(self) -> None:
        if self._stop is not None:
            raise self._raising(self._stop)
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise self._raising(TaskTimeout("timed out"))
        tokens = self.input_tokens + self.output_tokens
        if self.max_tokens is not None and tokens >= self.max_tokens:
            raise self._raising(BudgetExceeded(f"exceeded its max_tokens ({tokens}/{self.max_tokens} tokens)"))
        if self.max_usd is not None and self.cost_usd >= self.max_usd:
            raise self._raising(BudgetExceeded(
                f"exceeded its max_budget_per_run (${self.cost_usd:.4f}/${self.max_usd:.4f})"
            ))
        if self.budget is not None and (reason := self.budget.exhausted()):
            raise self._raising(BudgetExceeded(reason))

    def _raising(self, error: SubagentError) -> SubagentError:
        """``error``, remembered as the meter's own: a tool it passes through does not make it the tool's."""
        self._raised.append(error)
        del self._raised[:-8]
        return error

    def _start_call(self, run_id: Any, prompt: Any, kwargs: dict[str, Any]) -> None:
        self._check()
        with self._lock:
            if self.max_turns is not None and self.model_calls >= self.max_turns:
                raise self._raising(MaxTurnsReached(self.max_turns))
            self.model_calls += 1
        if self.budget is not None:
            # Reserving the prompt before the call bounds a shared budget's
            # overshoot to one call's output per running child (estimated only then).
            estimate = estimate_tokens(prompt)
            self.budget.reserve(estimate, _model_name(kwargs))
            self._reserved[run_id] = estimate

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any = None,
                            **kwargs: Any) -> None:
        self._start_call(run_id, messages, kwargs)

    def on_llm_start(self, serialized: Any, prompts: Any, *, run_id: Any = None, **kwargs: Any) -> None:
        self._start_call(run_id, prompts, kwargs)

    def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
        self._check()

    def on_llm_error(self, error: BaseException, *, run_id: Any = None, **kwargs: Any) -> None:
        self._saw(error, "model_error")
        self._release(run_id)

    def on_tool_error(self, error: BaseException, **kwargs: Any) -> None:
        self._saw(error, "tool_error")

    def _saw(self, error: BaseException, origin: StopReason) -> None:
        if any(error is raised for raised in self._raised):
            return  # the meter's own stop passing through a tool: no tool's error, nor like one
        self._seen.append((error, origin))
        del self._seen[:-8]

    def _release(self, run_id: Any) -> int:
        estimate = self._reserved.pop(run_id, 0)
        if estimate and self.budget is not None:
            self.budget.release(estimate)
        return estimate

    def on_llm_end(self, response: LLMResult, *, run_id: Any = None, **kwargs: Any) -> None:
        self._end_call(run_id, response)

    def _end_call(self, run_id: Any, response: LLMResult) -> None:
        self._release(run_id)
        usage, model_name = _usage_of(response)
        if not usage:
            return
        inp = token_count(usage.get("input_tokens"))  # reported by the server: never trusted
        out = token_count(usage.get("output_tokens"))
        cost = cost_of(self.prices, model_name, inp, out)
        with self._lock:
            self.input_tokens += inp
            self.output_tokens += out
            self.cost_usd += cost
        if self.budget is not None:
            self.budget.charge(model_name, inp, out)


def _model_name(kwargs: dict[str, Any]) -> str | None:
    params = kwargs.get("invocation_params") or {}
    name = params.get("model_name") or params.get("model")
    return name if isinstance(name, str) else None


def _usage_of(response: LLMResult) -> tuple[dict[str, Any] | None, str | None]:
    # `type(...) is dict` first: the usual value, without an abstract-class check on every model call.
    llm_output = response.llm_output
    if not (type(llm_output) is dict or isinstance(llm_output, Mapping)):
        llm_output = {}
    for generations in response.generations:
        for gen in generations:
            message = getattr(gen, "message", None)
            usage = getattr(message, "usage_metadata", None)
            if usage and (type(usage) is dict or isinstance(usage, Mapping)):
                meta = getattr(message, "response_metadata", None) or {}
                return dict(usage), _name_or_none(meta.get("model_name") or llm_output.get("model_name"))
    token_usage = llm_output.get("token_usage") or {}
    if token_usage and isinstance(token_usage, Mapping):
        usage = {
            "input_tokens": token_usage.get("prompt_tokens", 0),
            "output_tokens": token_usage.get("completion_tokens", 0),
        }
        return usage, _name_or_none(llm_output.get("model_name"))
    return None, None


def _dollars(value: Any) -> float:
    """A cost carried from an earlier record: a finite, non-negative number, else 0."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return max(float(value), 0.0) if ok else 0.0


def _name_or_none(name: Any) -> str | None:
    return name if isinstance(name, str) else None
