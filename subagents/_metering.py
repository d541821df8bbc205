"""Prices, the shared budget, and the one callback handler per child that meters it."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import decimal
import functools
import json
import logging
import math
import numbers
import re
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Iterator, Mapping
from typing import Annotated, Any, Literal

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import LLMResult
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tracers.context import register_configure_hook
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.errors import ParentCommand
from langgraph.types import Command
from pydantic import BeforeValidator

from subagents._boundary import with_prompt_block
from subagents._errors import (
    BudgetExceeded,
    ChildExit,
    MaxTurnsReached,
    SpecError,
    StopReason,
    SubagentError,
    TaskCancelled,
    TaskTimeout,
    from_signal_handler,
    is_ctrl_c,
)
from subagents._plans import ModelCallPlan
from subagents._roles import ChildPolicy
from subagents._transcripts import TranscriptSink

PriceTable = Mapping[str, tuple[float, float]]
"""Model name -> (USD per million input tokens, USD per million output tokens)."""

MAX_REPORTED_TOKENS = 10**15  # the most one reported count is taken for: past any limit, exact as a float
PROMPT_EXTRAS = ("tools", "functions", "response_format")  # sent beside the messages, billed as input
ESTIMATE_KEY = "estimated_input_tokens"  # in a reply's response_metadata: its prompt as estimated when sent
PRICE_KEY = "priced_as"  # in a reply's response_metadata: the price-table key it was charged at
OUTPUT_CAPS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "max_new_tokens", "num_predict")
DEFAULT_OUTPUT_BOUND = 16_384  # an abandoned call's output when no cap, nor a longer output of its model, is known


def token_count(value: Any) -> int:
    """A reported token count, untrusted, as an ``int`` in ``0..MAX_REPORTED_TOKENS``: a number (digit text,
    a huge ``Decimal``) is clamped, anything else (``NaN``, a bool, text) is 0; none gives a budget back."""
    if type(value) is int:  # the usual count, checked first (a bool is no count)
        return min(max(value, 0), MAX_REPORTED_TOKENS)
    try:  # any other number is untrusted too: one whose int() or comparison raises is no count
        if isinstance(value, bool):
            return 0
        if isinstance(value, str):
            text = value.strip()
            if not (text.isascii() and text.isdigit()):
                return 0
            digits = text.lstrip("0") or "0"
            return MAX_REPORTED_TOKENS if len(digits) > 16 else min(int(digits), MAX_REPORTED_TOKENS)
        if isinstance(value, numbers.Integral):
            return min(max(int(value), 0), MAX_REPORTED_TOKENS)
        if isinstance(value, (numbers.Real, decimal.Decimal)):
            real: Any = value  # compared before converting: a huge Fraction or Decimal does not fit a float
            if real != real or abs(real) == math.inf:  # NaN, or an infinity: no count at all
                return 0
            if real >= MAX_REPORTED_TOKENS:
                return MAX_REPORTED_TOKENS
            return int(real) if real > 0 else 0
    except Exception:  # noqa: BLE001 - a signalling NaN, a hostile subclass
        return 0
    return 0


def cost_of(prices: PriceTable | None, model_name: str | None, input_tokens: int, output_tokens: int) -> float:
    """The USD cost of one call, or 0.0 when the model has no price."""
    return cost_at(call_price(prices, model_name), input_tokens, output_tokens)


def cost_at(priced: tuple[str, tuple[float, float]] | None, input_tokens: Any, output_tokens: Any) -> float:
    """The USD cost of ``input_tokens`` and ``output_tokens`` at a price :func:`call_price` decided (0.0: none)."""
    return 0.0 if priced is None else \
        (token_count(input_tokens) * priced[1][0] + token_count(output_tokens) * priced[1][1]) / 1_000_000


_PROVIDER_PREFIX = re.compile(r"^[a-z][a-z0-9_-]*[:/]")  # openai:gpt-4.1, openai/gpt-4.1
_DATE_STAMP = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8})$")  # gpt-4.1-2025-04-14, claude-3-5-haiku-20241022
_SNAPSHOT = re.compile(r"\d{4}(?:-?\d{2}-?\d{2})?")  # 0613, 20241022, 2024-05-13: never 5 (claude-sonnet-4-5)


def call_price(prices: PriceTable | None, sent: str | None) -> tuple[str, tuple[float, float]] | None:
    """The price of a call to ``sent`` (as sent: after any fallback or router), ``(key, (input, output))`` or
    ``None``: names match as docs/ledger-and-budgets.md says; of equal matches, the dearest."""
    if not prices or not isinstance(sent, str) or not sent:
        return None
    if sent in prices:
        return sent, prices[sent]
    bare = _PROVIDER_PREFIX.sub("", sent)
    best: tuple[int, float, str] | None = None
    for key, price in prices.items():
        # A prefix off one side at most; ranked: the same name, the sent one undated, the key undated.
        pairs = ((sent, key), (bare, key), (sent, _PROVIDER_PREFIX.sub("", key)))
        rank = max(3 if a == b else 2 if _DATE_STAMP.sub("", a) == b else 1 if _DATE_STAMP.sub("", b) == a else 0
                   for a, b in pairs)
        if rank and (best is None or (rank, sum(price)) > best[:2]):
            best = (rank, sum(price), key)
    return None if best is None else (best[2], prices[best[2]])


def _refines(sent: str, name: str) -> bool:
    """Whether ``name`` is ``sent`` then ``-`` and a date stamp (docs/ledger-and-budgets.md)."""
    bare_sent, bare = _PROVIDER_PREFIX.sub("", sent), _PROVIDER_PREFIX.sub("", name)
    pairs = ((sent, name), (bare_sent, name), (sent, bare))
    return any(b.startswith(f"{a}-") and _SNAPSHOT.fullmatch(b[len(a) + 1:]) is not None for a, b in pairs)


def reply_price(prices: PriceTable | None, sent: str | None, priced: tuple[str, tuple[float, float]] | None,
                replied: str | None) -> tuple[str, tuple[float, float]] | None:
    """``priced`` (the sent model's), or that of a priced snapshot the reply names (:func:`_refines`), no other."""
    if not sent or not isinstance(replied, str) or not _refines(sent, replied):
        return priced
    return call_price(prices, replied) or priced


def hold_price(prices: PriceTable | None, sent: str | None,
               priced: tuple[str, tuple[float, float]] | None) -> tuple[float, float]:
    """The prices a call is held at by the budget, its own limits and the wrap-up check alike: the dearest its reply
    may refine to (:func:`reply_price`)."""
    refined = (price for key, price in (prices or {}).items() if sent and _refines(sent, key))
    pairs = [priced[1] if priced else (0.0, 0.0), *refined]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def unknown_model_price(prices: PriceTable | None) -> tuple[str, tuple[float, float]] | None:
    """The price of a call whose sent model is not known (its start unseen, or read back without its price): the
    dearest, never less than it cost; its reply's name is no price (a router's, a deployment's, another model's)."""
    return max((prices or {}).items(), key=lambda item: sum(item[1]), default=None)


def check_prices(prices: Any, *, argument: str = "prices") -> dict[str, tuple[float, float]]:
    """A price table as ``{model: (input, output)}`` USD per million tokens, or ``ValueError`` naming the entry."""
    if prices is None:
        return {}
    if not isinstance(prices, Mapping):
        raise SpecError(f"{argument}: expected a mapping of model name to (input, output) prices")
    try:
        items = list(prices.items())
    except Exception as exc:  # noqa: BLE001 - a hostile mapping is bad input, named as such
        raise SpecError(f"{argument}: could not be read ({type(exc).__name__})") from None
    checked: dict[str, tuple[float, float]] = {}
    for name, pair in items:
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2
                and all(isinstance(p, (int, float)) and type(p) is not bool and 0 <= p < float("inf") for p in pair)):
            raise SpecError(f"{argument}[{str(name)[:80]!r}]: expected two non-negative numbers "
                             "(USD per million input tokens, output tokens)")
        checked[str(name)] = (float(pair[0]), float(pair[1]))
    return checked


def run_prices(prices: Any, budget: Budget | None) -> dict[str, tuple[float, float]] | None:
    """``prices`` and the ``budget``'s entries it lacks; a model the two price differently is a ``SpecError``."""
    given = check_prices(prices) if prices is not None else None
    own = budget.prices if budget is not None else {}
    if given is None:
        return dict(own) if budget is not None else None
    for name, price in own.items():
        if given.get(name, price) != price:
            raise SpecError(f"prices[{name[:80]!r}] is {given[name]}, but the budget's prices give {price}: "
                             "a model has one price; pass one table to both")
    return {**own, **given}


def estimate_tokens(payload: Any) -> int:
    """A cheap upper-leaning guess of a prompt's tokens (docs/ledger-and-budgets.md: CJK bills a token a char)."""
    chars = others = 0
    stack = [payload]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            wide = 0 if item.isascii() else sum(not char.isascii() for char in item)
            chars, others = chars + len(item) - wide, others + wide
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        else:
            content = getattr(item, "content", None)
            if content is not None:
                stack.append(content)
            # Billed too: its tool calls, parsed or not, and its extras (reasoning) but the raw calls they repeat.
            calls = [*(getattr(item, "tool_calls", None) or ()), *(getattr(item, "invalid_tool_calls", None) or ())]
            stack.extend(f"{c.get('name', '')}{c.get('args', '')}" for c in calls)
            extras = getattr(item, "additional_kwargs", None)
            if isinstance(extras, dict):
                stack.extend(v for k, v in extras.items() if k not in ("tool_calls", "function_call"))
    return chars // 4 + others + 1


def prompt_estimate(messages: Any, invocation_params: Any = None) -> int:
    """A guess of a call's prompt as billed: the messages, plus the tool schemas and response format in
    its ``invocation_params`` (billed on every call; with many tools, more than the conversation)."""
    tokens = estimate_tokens(messages)
    if isinstance(invocation_params, Mapping):
        if extras := [extra for key in PROMPT_EXTRAS if (extra := invocation_params.get(key))]:
            try:
                text = json.dumps(extras, default=str)
            except (TypeError, ValueError, RecursionError):  # an odd schema: its text, roughly
                text = str(extras)
            tokens += len(text) // 4
    return tokens


MIN_TOKEN_SCALE, MAX_TOKEN_SCALE = 0.5, 16.0  # tokenizers differ this much; a hostile report moves no further
LEARNED_SCALE_MARGIN = 1.1  # a ratio learned on a short prompt understates a long one's by up to ~10%


def _amount(unit: str, value: Any) -> str:
    """A token count or a dollar amount, as the limits' messages write it."""
    return f"{value}" if unit == "tokens" else f"${value:.4f}"


def _ratio(unit: str, spent: Any, limit: Any) -> str:
    return f"{spent}/{limit} tokens" if unit == "tokens" else f"${spent:.4f}/${limit:.4f}"


def learned_scale(estimated: int, charged: int) -> float:
    """The ratio a call teaches: ``charged`` input tokens per ``estimated`` one, with the margin, in the clamps."""
    return min(max(charged / estimated * LEARNED_SCALE_MARGIN, MIN_TOKEN_SCALE), MAX_TOKEN_SCALE)


class Budget:
    """Tokens and/or USD shared by a parent and all its children: once spent, new delegations are refused and
    running children stop at their next model call."""

    reserved: int  # held by running calls
    reserved_usd: float
    # (tokens, usd): the smallest call refused, and the least room a child foresaw for a call and its wrap-up
    # (TaskMeter.last_call): once spending leaves less, the budget is spent for new work (spent_error).
    _smallest_refused: list[float | None]
    _foreseen: list[float | None]

    def __init__(self, *, max_tokens: int | None = None, max_usd: float | None = None,
                 prices: PriceTable | None = None) -> None:
        # A NaN limit would compare false forever (a budget that never stops), a bool or text is a slip.
        if max_tokens is not None and (type(max_tokens) is bool or not isinstance(max_tokens, int) or max_tokens <= 0):
            raise SpecError(f"Budget: max_tokens must be positive, a whole number of tokens (got {max_tokens!r:.80})")
        if max_usd is not None and (isinstance(max_usd, bool) or not isinstance(max_usd, (int, float))
                                    or not 0 < max_usd < float("inf")):
            raise SpecError(f"Budget: max_usd must be positive, a finite number of US dollars (got {max_usd!r:.80})")
        if max_usd is not None and not prices:
            raise SpecError("max_usd needs a price table: pass prices={model: (in, out)}")
        self.max_tokens, self.max_usd, self.prices = max_tokens, max_usd, check_prices(prices)
        self._lock = threading.Lock()
        self._scales: dict[str, float] = {}  # model name -> reported / estimated input tokens
        self._let_in_alone: set[str | None] = set()  # models whose one call at its estimate went (see hold)
        self.longest_output: dict[str | None, int] = {}  # model -> the most output a call of it was charged
        self.reset()

    def hold(self, estimate: int, model_name: str | None, input_price: float = 0.0, *, refuse: bool = True,
             alone_at_estimate: bool = False, instead_of: tuple[int, float] = (0, 0.0)) -> tuple[int, float]:
        """Reserve a call of ``estimate`` tokens at the learned ratio, or :data:`MAX_TOKEN_SCALE` before one (a
        model's first, ``alone_at_estimate``, at its estimate); ``instead_of``: room held for it ahead (last_call)."""
        with self._lock:
            self.reserved = max(0, self.reserved - instead_of[0])
            self.reserved_usd = max(0.0, self.reserved_usd - instead_of[1])
            scale = self._scales.get(model_name) if model_name else None
            tokens = math.ceil(token_count(estimate) * (scale or MAX_TOKEN_SCALE))
            usd = tokens * dollars(input_price) / 1_000_000
            # Covered by its held room, it was judged in the limit then: a sibling's output since does not refuse it.
            if refuse and tokens <= instead_of[0] and usd <= instead_of[1]:
                refuse = self.spent_error() is not None
            if scale is not None:
                return self._reserve(tokens, usd, refuse)
            if not alone_at_estimate or self.reserved or self.reserved_usd or model_name in self._let_in_alone:
                return self._reserve(tokens, usd, refuse, remember=False)  # refused at the clamp: not spent
            # Alone, its model's first: admitted at its estimate, holding the clamp while it runs, so no sibling
            # counts on that room. Once: a model whose reports teach no ratio would pass the limit on every call.
            self._let_in_alone.add(model_name)
            admit = token_count(estimate)
            self._reserve(admit, admit * dollars(input_price) / 1_000_000, refuse, remember=False)
            self.reserved += tokens - admit
            self.reserved_usd += usd - admit * dollars(input_price) / 1_000_000
            return tokens, usd

    def learned(self, model_name: str | None) -> float | None:
        """The ratio learned for ``model_name`` (charged input tokens per estimated one), if any."""
        return self._scales.get(model_name) if model_name else None

    def reserve(self, tokens: int, usd: float = 0.0, *, refuse: bool = True) -> tuple[int, float]:
        """Hold a call's prompt before it starts, or raise :class:`BudgetExceeded` when spent + held + this would
        pass a limit (parallel calls overshoot by one output each at most); ``refuse=False`` never raises."""
        with self._lock:
            return self._reserve(token_count(tokens), dollars(usd), refuse)

    def _limits(self) -> tuple[tuple[Literal["tokens", "usd"], float | None, float, float], ...]:
        """Each limit: its unit, its bound, what is spent and what running calls hold."""
        return (("tokens", self.max_tokens, self.tokens, self.reserved),
                ("usd", self.max_usd, self.usd, self.reserved_usd))

    def _reserve(self, tokens: int, cost: float, refuse: bool, remember: bool = True) -> tuple[int, float]:
        if refuse and (spent := self.spent_error()) is not None:
            raise spent
        for i, (unit, limit, spent_now, held) in enumerate(self._limits() if refuse else ()):
            need = (tokens, cost)[i]
            if limit is not None and spent_now + held + need > limit:
                if remember:
                    self._smallest_refused[i] = min(self._smallest_refused[i] or need, need)
                raise self._over(unit, f"cannot cover another call ({_amount(unit, spent_now)} spent, "
                                       f"{_amount(unit, held)} held by running calls, ~{_amount(unit, need)} more "
                                       f"needed, limit {_amount(unit, limit)})")
        self.reserved += tokens
        self.reserved_usd += cost
        return tokens, cost

    def _over(self, unit: Literal["tokens", "usd"], why: str) -> BudgetExceeded:
        if unit == "tokens":
            return BudgetExceeded(f"the shared token budget {why}", limit=self.max_tokens, spent=self.tokens, unit=unit)
        return BudgetExceeded(f"the shared budget {why}", limit=self.max_usd, spent=self.usd, unit=unit)

    def release(self, tokens: int, usd: float = 0.0) -> None:
        """Give back a reservation once its call has ended (its real usage is charged)."""
        with self._lock:
            self.reserved = max(0, self.reserved - tokens)
            self.reserved_usd = max(0.0, self.reserved_usd - usd)

    def learn(self, model_name: str | None, estimated: int, charged_input: Any) -> None:
        """Scale later reservations for ``model_name`` by charged / ``estimated`` input tokens; the ratio only rises."""
        charged = token_count(charged_input)
        # An unnamed model cannot be told from another unnamed one: it stays at the clamp.
        if estimated <= 0 or charged <= 0 or not model_name:
            return
        scale = learned_scale(estimated, charged)
        with self._lock:
            self._scales[model_name] = max(scale, self._scales.get(model_name, scale))

    def foresee(self, tokens: int, usd: float) -> None:
        """A child found no room for a call and its wrap-up (``tokens``, ``usd``): see :meth:`spent_error`."""
        with self._lock:
            self._foreseen[0] = min(self._foreseen[0] or tokens, tokens)
            self._foreseen[1] = min(self._foreseen[1] or usd, usd) if usd else self._foreseen[1]

    def spent_error(self, *, foreseen: bool = False) -> BudgetExceeded | None:
        """The :class:`BudgetExceeded` once the budget is spent, else ``None``; ``foreseen`` (new work, not a running
        child's call): also once what is left cannot cover the smallest call refused or a child's call and wrap-up."""
        limits = self._limits()
        for unit, limit, spent, _ in limits:
            if limit is not None and spent >= limit:
                return self._over(unit, f"is spent ({_ratio(unit, spent, limit)})")
        for i, (unit, limit, spent, _) in enumerate(limits if foreseen else ()):  # a running child's call: _reserve
            need = min((n for n in (self._smallest_refused[i], self._foreseen[i]) if n is not None), default=None)
            if limit is not None and need is not None and spent + need > limit:
                return self._over(unit, f"is spent ({_ratio(unit, spent, limit)}: too little is left for a call of "
                                        f"~{_amount(unit, need)})")
        return None

    def charge(self, model_name: str | None, input_tokens: Any, output_tokens: Any) -> float:
        """Add one call's usage (as reported: see :func:`token_count`) at ``model_name``'s price; return its cost."""
        input_tokens, output_tokens = token_count(input_tokens), token_count(output_tokens)
        cost = cost_at(call_price(self.prices, model_name), input_tokens, output_tokens)
        self.spend(input_tokens + output_tokens, cost)
        return cost

    def spend(self, tokens: int, usd: float) -> None:
        """Add what one call was charged (a :class:`TaskMeter` decided its tokens and price)."""
        with self._lock:
            self.tokens += max(int(tokens), 0)  # counts already clamped one by one (token_count)
            self.usd += dollars(usd)

    def swap(self, held: tuple[int, float], need: tuple[int, float]) -> Literal["tokens", "usd"] | None:
        """Hold ``need`` in place of ``held`` if what is left covers it, else name the limit it passes; under the
        lock, so no other call takes the room between."""
        with self._lock:
            for i, (unit, limit, spent, reserved) in enumerate(self._limits()):
                if limit is not None and limit - spent - reserved + held[i] < need[i]:
                    return unit
            self.reserved = max(0, self.reserved - held[0]) + need[0]
            self.reserved_usd = max(0.0, self.reserved_usd - held[1]) + need[1]
        return None

    def exhausted(self) -> str | None:
        """Why the budget is spent for new work (see :meth:`spent_error`'s ``foreseen``), or ``None`` if it is not."""
        return None if (spent := self.spent_error(foreseen=True)) is None else str(spent)

    def reset(self) -> None:
        with self._lock:
            self.tokens = self.reserved = 0
            self.usd = self.reserved_usd = 0.0
            self._smallest_refused, self._foreseen = [None, None], [None, None]


# The interpreter's messages for a GeneratorExit that a coroutine or generator did not let end it.
_IGNORED_GENERATOR_EXIT = frozenset({"coroutine ignored GeneratorExit", "generator ignored GeneratorExit",
                                     "async generator ignored GeneratorExit"})
_RAISED_BY = "_subagents_raised_by"  # the meter a stop was raised by (TaskMeter._raising), kept on the stop
COUNTS = ("model_calls", "input_tokens", "output_tokens", "charged_input_tokens", "charged_output_tokens")
STALL_NOTE_S = 0.5  # How far past its deadline a task must run before its timeout says what held it.
DEFAULT_WRAP_UP_SHARE = 0.15  # the share of timeout_s left that makes the next call the wrap-up (9s of 60s)
PROGRESS_INPUT_CHARS = 80  # the longest tool argument a progress event names
log = logging.getLogger(__name__)


def _not_a_meter_stop(record: logging.LogRecord) -> bool:
    """Drops LangChain's "Error in TaskMeter.on_... callback" warning for a meter's stop (how it ends a child)."""
    args = record.args
    return not (isinstance(args, tuple) and len(args) == 3 and isinstance(args[0], str)
                and args[0] in _class_names(TaskMeter) | _class_names(_NodeMeter))


def _class_names(cls: type) -> set[str]:  # of cls and its subclasses, as they are now
    return {cls.__name__}.union(*map(_class_names, cls.__subclasses__()))


# The logger is LangChain's callback manager's (named for its module, as logging.getLogger(__name__) does).
logging.getLogger("langchain_core.callbacks.manager").addFilter(_not_a_meter_stop)


class TaskMeter(BaseCallbackHandler):
    """Per-task usage counter with a deadline, budgets and a stop switch. Raising from a callback, it stops the
    child at its next model or tool call (the only way to end an abandoned child's thread on ``invoke``); it
    remembers where errors came from, so failures are classified by type and origin, never by message."""

    raise_error = run_inline = True
    # Chain events are the most frequent and unneeded; tool events come under "agent", which stays on.
    ignore_chain = ignore_retriever = True

    def __init__(self, *, deadline: float | None = None, max_turns: int | None = None, max_tokens: int | None = None,
                 max_usd: float | None = None, prices: PriceTable | None = None, budget: Budget | None = None) -> None:
        self.model_calls = self.input_tokens = self.output_tokens = 0  # as reported
        self.charged_input_tokens = self.charged_output_tokens = 0  # or the estimate, where no count was plausible
        self.cost_usd = 0.0
        self.priced_as: set[str] = set()  # the price-table keys this task's calls were charged at
        self.refuses = True  # whether a spent shared budget refuses its calls (off for the root's last answer)
        self.alone_at_estimate = False  # see Budget.hold (the root's calls)
        self.timeout_s: float | None = None  # the task's timeout_s behind deadline, for TaskTimeout
        self.max_turns, self.max_tokens, self.max_usd = max_turns, max_tokens, max_usd
        self.deadline, self.prices, self.budget = deadline, prices, budget
        self._seen: list[tuple[BaseException, StopReason]] = []  # the last few model/tool errors, newest last
        self._stop: SubagentError | None = None
        # The last stop raised in the child, until a call goes through: read by the runner, so a child middleware
        # turning errors into answers (ModelRetryMiddleware) cannot hide it.
        self.stopped_by: SubagentError | None = None
        # Run id -> its running calls, as sent and priced: several where concurrent calls share one (a config reused);
        # a call charged as abandoned stays until its end comes, marked paid (_abandon).
        self._calls: dict[Any, list[_Call]] = {}
        self._lock = threading.RLock()  # reentrant: settled_usage ends calls under it
        self._tools: dict[Any, tuple[str, float]] = {}  # run id -> (tool name, started): tools running now
        self._last_tool: tuple[str, float, float] | None = None  # the latest to end: name, started, ended
        self.on_progress: Callable[[dict[str, Any]], None] | None = None  # told of each tool call as it starts
        self.progress_about: dict[str, Any] = {}  # what each progress event names first (type, task ids)
        self.wrap_up: WrapUpSetting | None = None  # the task's wrap-up setting (WrapUp); None or False: none
        self.wrapped_up: SubagentError | None = None  # the limit that made a call the wrap-up, once one was
        self.said = ""  # the child's latest text (WrapUp notes it): its answer if a limit ends it before its wrap-up
        self._wrap_up_sent = False
        self._last_estimate: int | None = None  # the last call's prompt, as estimated when sent
        self._own_scale: float | None = None  # the highest believed / estimated input ratio: own limits use it
        self.longest_call_s = 0.0  # the longest model call, so the wrap-up comes while time covers one
        self.extras_estimate: int | None = None  # the last call's tool schemas and response format, estimated
        # Held in the shared budget for its next call and wrap-up (None: settled); the next call's part of it.
        self._room_held: tuple[int, float] | None = (0, 0.0)
        self._room_for_call: tuple[int, float] = (0, 0.0)
        self._own_held: tuple[int, float] = (0, 0.0)  # held against its own limits by calls running (_hold_own)

    def stop(self, error: SubagentError) -> None:
        """Make the child raise ``error`` at its next model or tool call."""
        self._stop = error

    def cancel(self) -> None:
        self.stop(TaskCancelled("was cancelled"))

    def carry(self, spent: dict[str, Any]) -> None:
        """Start from what an earlier run of the same task spent (before an approval pause)."""
        with self._lock:
            for key in COUNTS:  # a record without charged counts: as reported
                count = spent.get(key, spent.get(key.removeprefix("charged_")))
                setattr(self, key, getattr(self, key) + token_count(count))
            self.cost_usd += dollars(spent.get("cost_usd"))
            priced = spent.get("priced_as")
            if isinstance(priced, list):
                self.priced_as.update(name for name in priced if isinstance(name, str))

    def usage(self) -> dict[str, Any]:
        """The task's figures: tokens as reported and as charged, the cost, and the prices it was charged at."""
        return {**{key: getattr(self, key) for key in COUNTS}, "cost_usd": round(self.cost_usd, 6),
                "priced_as": sorted(self.priced_as)}

    def source_of(self, exc: BaseException) -> BaseException:
        """The error a model or tool raised that ``exc`` stands in for (a meter stop a tool wrapped, a
        ``GeneratorExit`` the interpreter reported unlinked); ``exc`` itself if none."""
        if type(exc) is RuntimeError and len(exc.args) == 1 and exc.args[0] in _IGNORED_GENERATOR_EXIT:
            return next((seen for seen, _ in reversed(self._seen) if isinstance(seen, GeneratorExit)), exc)
        # A StopIteration (or a tool's GeneratorExit: boundary._call) leaves as a RuntimeError from it: told as itself.
        cause = exc.__cause__
        if type(exc) is RuntimeError and isinstance(cause, (StopIteration, StopAsyncIteration, GeneratorExit)) and \
                any(seen is exc or seen is cause for seen, _ in self._seen):
            return cause
        cause = exc
        for _ in range(8):  # the meter's own stop, wrapped by a tool it passed through
            if (cause := cause.__cause__ or cause.__context__) is None:
                break
            if self._raised(cause):
                return cause
        return exc

    def origin_of(self, exc: BaseException) -> StopReason | None:
        """``model_error`` or ``tool_error`` when ``exc`` is what a model or tool raised."""
        exc = self.source_of(exc)
        if self._raised(exc):  # the meter's own stop, passed through a tool
            return None
        # The error that ended the run need not be the latest seen (tools failing in one step); one raised
        # from a seen error comes from it.
        for seen, origin in reversed(self._seen):
            if seen is exc or seen is exc.__cause__ or seen.__cause__ is exc:
                return origin
        if not self._seen:
            return None
        seen, origin = self._seen[-1]
        # asyncio re-creates a TimeoutError crossing from an executor thread: same type and args.
        try:
            return origin if type(seen) is type(exc) and seen.args == exc.args else None
        except Exception:  # noqa: BLE001 - uncomparable args: not the same error
            return None

    def cut_before_wrap_up(self, exc: BaseException) -> tuple[SubagentError, str] | None:
        """``(limit, the child's last text)`` when ``exc`` is (or stands in for) a limit this meter refused a call
        with before the wrap-up (a middleware's own call in ``before_model``) or after it (``after_model``)."""
        if self.wrap_up in (None, False) or not self.said:
            return None
        try:
            stop = self.source_of(exc)
        except BaseException:  # noqa: BLE001 - a hostile error's attributes: the failure path must never raise
            return None
        if not isinstance(stop, SubagentError) or stop.stop_reason not in ("max_turns", "timeout", "budget"):
            return None
        return (self.wrapped_up or stop, self.said) if self._raised(stop) else None

    def last_call(self, estimate: int, model_name: str | None) -> SubagentError | None:
        """The limit that will refuse the call after the next one (making the next its wrap-up), or ``None``.
        A task going on holds room in the shared budget for both, so siblings cannot take its wrap-up's room."""
        held = self._room_held or (0, 0.0)
        self._room_for_call = held  # a wrap-up: the call takes over all that is held
        if self.max_turns is not None and self.model_calls + 1 >= self.max_turns:
            return MaxTurnsReached(self.max_turns)
        share = DEFAULT_WRAP_UP_SHARE if self.wrap_up is True else self.wrap_up or 0.0
        if self.deadline is not None and self.timeout_s and \
                self.deadline - time.monotonic() < max(share * self.timeout_s, 2 * self.longest_call_s):
            return TaskTimeout("timed out", timeout_s=self.timeout_s)
        budget = self.budget
        learned = budget.learned(model_name) if budget is not None else None
        table = self.prices or (budget.prices if budget else None)
        price = ("held", hold_price(table, model_name, call_price(table, model_name)))  # as _sent holds it
        output = self.charged_output_tokens // self.model_calls if self.model_calls else 0
        estimate = token_count(estimate)
        # The wrap-up's prompt as its hold will estimate it: grown as since the last call, plus its instruction
        # (the unsent tool schemas stay in as slack).
        grown = 2 * estimate - min(self._last_estimate or estimate, estimate) + _WRAP_UP_PROMPT_TOKENS

        def need_at(scale: float) -> tuple[int, float, int]:
            """This call and the next (its prompt grown as this one's did), both at ``scale``; this call's prompt."""
            now, then = math.ceil(estimate * scale), math.ceil(grown * scale)
            return now + then + 2 * output, cost_at(price, now, output) + cost_at(price, then, output), now

        # Its own limits at the ratio its calls showed, the budget's, or the margin (a first call).
        need, need_usd, _ = need_at(self._own_scale or learned or LEARNED_SCALE_MARGIN)
        # Worded as the limit's own stop would be: a wrap-up with no answer ends the task as that stop did.
        for (unit, limit, spent), needed in zip(self._own_limits(), (need, need_usd), strict=True):
            if limit is not None and spent + needed > limit:
                return self._over_own(unit, spent, ", with the one more call it had room for")
        if budget is not None:
            # Both calls as the budget will hold them: at the clamp before a ratio is learned.
            need, need_usd, now = need_at(learned or MAX_TOKEN_SCALE)
            with self._lock:  # judged and held in one step of the budget's: no sibling takes the room between
                if self._room_held is None:  # settled meanwhile: it holds nothing more
                    return None
                short = budget.swap(held, (need, need_usd))
                if short is None:
                    self._room_held, self._room_for_call = (need, need_usd), (now, cost_at(price, now, 0))
                    return None
            if learned is not None:  # at the clamp, they are no measure of what new work needs
                budget.foresee(need, need_usd)
            _, limit, spent, _ = budget._limits()[short == "usd"]
            return budget._over(short, f"cannot cover another call ({_amount(short, spent)} spent, limit "
                                       f"{_amount(short, limit)}; it had room for one more)")
        return None

    def settled_usage(self) -> dict[str, Any]:
        """The ended (or paused) task's :meth:`usage`, once the room it held is given back for good and each call whose
        end has not come (abandoned at its timeout, cancelled) is charged what it held (:meth:`_abandon`), so the record
        shows what the budget was charged; ``unsettled_calls``: how many such calls a later report may add to."""
        with self._lock:  # a call ending meanwhile on its thread waits, then finds it paid (_end_call)
            held, self._room_held, self._room_for_call = self._room_held, None, (0, 0.0)
            for run_id, call in [(run_id, c) for run_id, calls in self._calls.items() for c in calls]:
                self._abandon(run_id, call)
            unsettled = sum(map(len, self._calls.values()))
        if held and self.budget is not None:
            self.budget.release(*held)
        return {**self.usage(), "unsettled_calls": unsettled} if unsettled else self.usage()

    def _room_taken_by_call(self) -> tuple[int, float]:
        """The room held ahead for the call being sent, now its own (see :meth:`last_call`)."""
        with self._lock:
            wanted, self._room_for_call = self._room_for_call, (0, 0.0)
            held = self._room_held or (0, 0.0)
            taken = (min(wanted[0], held[0]), min(wanted[1], held[1]))  # never more than it holds
            if self._room_held is not None:
                self._room_held = (held[0] - taken[0], held[1] - taken[1])
        return taken

    def limits_line(self) -> str:
        """The child's prompt line naming its limits as they began (unchanging, so a prompt cache holds)."""
        parts = [f"{self.max_turns} model calls" if self.max_turns is not None else "",
                 f"{self.timeout_s:g}s" if self.timeout_s else "",
                 f"{self.max_tokens} tokens" if self.max_tokens is not None else "",
                 f"${self.max_usd:g}" if self.max_usd is not None else "",
                 "a budget shared with other agents" if self.budget is not None else ""]
        named = ", ".join(part for part in parts if part)
        return f"Limits: at most {named}. Near one, your last call has no tools: answer then." if named else ""

    def raise_if_stopped(self, *, call: bool = False) -> None:
        """Raise the meter's own stop (deadline passed, cancelled, budget spent) if there is one now."""
        if self._stop is not None:
            raise self._raising(self._stop)
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise self._raising(self.timeout_error())
        # An own limit passed by an unforeseen output still ends with an answer: that call's tools run, and
        # the next call is the wrap-up. Without a wrap-up, and after it, the limit refuses.
        if self._wrap_up_sent or self.wrap_up in (None, False) or \
                (self.wrapped_up is None) is call:  # a call before the wrap-up was made, or a step after it
            for unit, limit, spent in self._own_limits():
                if limit is not None and spent >= limit:
                    raise self._raising(self._over_own(unit, spent))
        if self.refuses and self.budget is not None and (spent := self.budget.spent_error()) is not None:
            raise self._raising(spent)

    def _own_limits(self, held: tuple[int, float] = (0, 0.0)) -> Iterator[tuple[Literal["tokens", "usd"], Any, Any]]:
        """The task's own limits: each unit, its bound, and what is spent (with ``held``)."""
        yield "tokens", self.max_tokens, self.charged_input_tokens + self.charged_output_tokens + held[0]
        yield "usd", self.max_usd, self.cost_usd + held[1]

    def _over_own(self, unit: Literal["tokens", "usd"], spent: float, note: str = "") -> BudgetExceeded:
        limit, name = (self.max_tokens, "max_tokens") if unit == "tokens" else (self.max_usd, "max_budget_per_run")
        return BudgetExceeded(f"exceeded its {name} ({_ratio(unit, spent, limit)}{note})", limit=limit, spent=spent,
                              unit=unit)

    def _raising(self, error: SubagentError) -> SubagentError:
        """``error``, marked on itself as the meter's own (a tool it passes through, or a batch it refuses)."""
        vars(error)[_RAISED_BY] = self
        self.stopped_by = error
        return error

    def _raised(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a stop this meter raised, judged by its type (a ``__class__`` cannot fake it)."""
        return issubclass(type(exc), SubagentError) and vars(exc).get(_RAISED_BY) is self

    def _start_call(self, run_id: Any, prompt: Any, kwargs: dict[str, Any]) -> None:
        self.raise_if_stopped(call=True)
        wrapping = self.wrapped_up is not None and not self._wrap_up_sent
        self._wrap_up_sent = self.wrapped_up is not None
        with self._lock:
            # The wrap-up may pass max_turns by one (a summariser's call may take its turn); none after it.
            if self.max_turns is not None and self.model_calls >= self.max_turns and not wrapping:
                raise self._raising(MaxTurnsReached(self.max_turns))
            self.model_calls += 1
        self._progress(None, None)
        try:
            call = self._sent(prompt, kwargs, wrapping)
        except BudgetExceeded as refused:
            # Refused before it reached the model: no call was made, nor any of its batch (LangChain starts a batch's
            # prompts one by one, then sends none), whose holds those started already give back.
            params = kwargs.get("invocation_params")
            batch = [(rid, call) for rid, calls in list(self._calls.items()) for call in list(calls)
                     if params is not None and call.sent[1] is params]
            for rid, call in batch:
                self._release(rid, call)
            with self._lock:
                self.model_calls -= 1 + len(batch)
            self._raising(refused)  # the meter's own stop, which no child middleware may turn into an answer
            raise
        with contextlib.suppress(RuntimeError):  # no event loop: a sync call, whose end LangChain always reports
            # Cancelled, LangChain reports no end: once the task it was sent from ends, it is abandoned.
            if (task := asyncio.current_task()) is not None:
                task.add_done_callback(lambda _: self._abandon(run_id, call))
        self.stopped_by = None  # a call let through: no earlier stop held (a sibling gave back room)
        self._calls.setdefault(run_id, []).append(call)

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any = None, **kwargs: Any) -> None:
        self._start_call(run_id, messages, kwargs)

    def on_llm_start(self, serialized: Any, prompts: Any, *, run_id: Any = None, **kwargs: Any) -> None:
        self._start_call(run_id, prompts, kwargs)

    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: Any = None, **kwargs: Any) -> None:
        self.raise_if_stopped()
        name = (serialized or {}).get("name") if isinstance(serialized, Mapping) else None
        with self._lock:  # parallel tool calls of one child start and end on several threads
            self._tools[run_id] = (str(name or kwargs.get("name") or "a tool"), time.monotonic())
            if len(self._tools) > 64:  # calls whose end never came (a cancelled one): the oldest go
                self._tools.pop(next(iter(self._tools)))
        if self.on_progress is not None:  # named by its first text argument (a path, a command), cut short
            inputs = kwargs.get("inputs")
            text = next((" ".join(v.split()) for v in (inputs.values() if isinstance(inputs, Mapping) else ())
                         if isinstance(v, str) and v.strip()), None)
            cut = text[:PROGRESS_INPUT_CHARS - 3] + "..." if text and len(text) > PROGRESS_INPUT_CHARS else text
            self._progress(name or kwargs.get("name"), cut)

    def on_tool_end(self, output: Any, *, run_id: Any = None, **kwargs: Any) -> None:
        with self._lock:
            started = self._tools.pop(run_id, None)
        if started is not None:
            self._last_tool = (started[0], started[1], time.monotonic())

    def timeout_error(self) -> TaskTimeout:
        """The task's timeout; more than :data:`STALL_NOTE_S` late, naming the tool that held its thread or loop."""
        late = time.monotonic() - self.deadline if self.deadline is not None else 0.0
        stalled = None
        if late > STALL_NOTE_S:
            # A suspect only: the latest tool to end, if past the deadline, else one still running.
            if self._last_tool is not None and self._last_tool[2] >= (self.deadline or 0.0):
                culprit: tuple[str, float] | None = self._last_tool[:2]
            else:
                with self._lock:
                    culprit = next(iter(self._tools.values()), None)
            during = f" while its tool '{culprit[0]}' ran" if culprit is not None else ""
            stalled = (f"it could not be stopped for {late:.1f}s more: its thread or event loop was held{during} "
                       "(a blocking call in an async tool, its own or a sibling's on the same loop, stalls the "
                       "parent and every sibling; await it, or run it with asyncio.to_thread)")
        return TaskTimeout("timed out", timeout_s=self.timeout_s, stalled=stalled)

    def _progress(self, tool: Any, tool_input: str | None) -> None:
        if self.on_progress is not None:
            with contextlib.suppress(Exception):  # a broken progress consumer must never fail the child
                self.on_progress({**self.progress_about, "turn": self.model_calls,
                                  "tool": str(tool) if tool else None, "tool_input": tool_input, **self.usage()})

    def on_llm_error(self, error: BaseException, *, run_id: Any = None, response: LLMResult | None = None,
                     **kwargs: Any) -> None:
        try:
            self._saw(error, "model_error")
        finally:  # a call it let start was sent: charged its prompt and any partial reply, whatever _saw raises
            if self._calls.get(run_id):
                self._end_call(run_id, response or LLMResult(generations=[]))

    def on_tool_error(self, error: BaseException, *, run_id: Any = None, **kwargs: Any) -> None:
        self.on_tool_end(None, run_id=run_id)
        self._saw(error, "tool_error")

    def _abandon(self, run_id: Any, call: _Call) -> None:
        """A call whose end has not come as its task ended, cancelled or not: the meter cannot know its provider
        stopped, so it is charged what it held, at its hold's price, and stays running: a report that comes later is
        charged only what it shows beyond."""
        with self._lock:
            if call.paid or call not in self._calls.get(run_id, ()):
                return
            call.paid = TaskMeter._end_call(call.meter, run_id, LLMResult(generations=[]), call, abandoned=True)
            call.tokens, call.usd, call.own = 0, 0.0, (0, 0.0)  # given back: settled again, it gives back nothing
            self._calls.setdefault(run_id, []).append(call)

    def _saw(self, error: BaseException, origin: StopReason) -> None:
        if self._raised(error):
            return  # the meter's own stop passing through a tool: no tool's error, nor like one
        self._seen.append((error, origin))
        del self._seen[:-8]
        if isinstance(error, SystemExit) and not from_signal_handler(error):
            # A model's or tool's sys.exit (argparse) ends this task, not the process: raised here, it replaces it.
            raise ChildExit(error) from error

    def _sent(self, prompt: Any, kwargs: dict[str, Any], wrapping: bool = False) -> _Call:
        """The call as sent, priced and held. Under a dollar limit an unpriced model is refused (at $0, never stops)."""
        # Sent to: extra_body's model (it overrides the body's), the parameters' (a router's too), the metadata's.
        params = kwargs.get("invocation_params") or {}
        body = params.get("extra_body")
        names = (body.get("model") if isinstance(body, Mapping) else None, params.get("model"),
                 params.get("model_name"), (kwargs.get("metadata") or {}).get("ls_model_name"))
        name = next((name for name in names if isinstance(name, str) and name), None)
        budget = self.budget
        table = self.prices or (budget.prices if budget is not None else None)
        priced = call_price(table, name)
        max_usd = self.max_usd if self.max_usd is not None else budget.max_usd if budget is not None else None
        if priced is None and max_usd is not None:
            raise BudgetExceeded(
                f"no price for model {name!r}, so the dollar limit cannot count its calls; add it to "
                "prices={model: (input, output)}", limit=max_usd, spent=self.cost_usd, unit="usd")
        # The prompt as billed, schemas included: reserved first, it bounds the overshoot to one output a call.
        self.extras_estimate = extras = prompt_estimate((), kwargs.get("invocation_params")) - estimate_tokens(())
        self._last_estimate = estimate = estimate_tokens(prompt) + extras
        input_price, output_price = hold_price(table, name, priced)
        own = (0, 0.0) if wrapping else self._hold_own(estimate, name, input_price)  # the wrap-up may pass them by one
        held = (0, 0.0)
        if budget is not None:
            try:
                held = budget.hold(estimate, name, input_price, refuse=self.refuses,
                                   instead_of=self._room_taken_by_call(), alone_at_estimate=self.alone_at_estimate)
            except BudgetExceeded:
                self._give_back_own(own)
                raise
        cap = next((token_count(params.get(key)) for key in OUTPUT_CAPS if token_count(params.get(key))), 0)
        call = _Call(self, name, priced, estimate, *held, time.monotonic(), own, _sent_as(prompt, kwargs),
                     (cap, output_price))
        _SENT_HERE.set((*_SENT_HERE.get()[-7:], call))
        return call

    def _hold_own(self, estimate: int, name: str | None, input_price: float) -> tuple[int, float]:
        """Hold a call's prompt against the task's own limits as the budget does, or refuse one they cannot cover."""
        if self.max_tokens is None and self.max_usd is None:
            return 0, 0.0
        learned = self.budget.learned(name) if self.budget is not None else None
        tokens = math.ceil(estimate * (self._own_scale or learned or LEARNED_SCALE_MARGIN))
        usd = tokens * input_price / 1_000_000
        with self._lock:
            for (unit, limit, spent), need in zip(self._own_limits(self._own_held), (tokens, usd), strict=True):
                if limit is not None and spent + need > limit:
                    raise self._over_own(unit, spent, f" spent and held, ~{_amount(unit, need)} more needed")
            self._own_held = (self._own_held[0] + tokens, self._own_held[1] + usd)
        return tokens, usd

    def _give_back_own(self, own: tuple[int, float]) -> None:
        with self._lock:
            self._own_held = (max(0, self._own_held[0] - own[0]), max(0.0, self._own_held[1] - own[1]))

    def _release(self, run_id: Any, call: _Call | None = None) -> _Call | None:
        """The call ended (``call``, else the one :meth:`_ending` finds), its holds given back; ``None``: none ran."""
        with self._lock:
            running = self._calls.get(run_id, [])
            if (call := call or self._ending(run_id)) not in running:
                return None
            running.remove(call)
            if not running:
                del self._calls[run_id]
            call.sent = (None, None)  # its prompt: not kept alive by the contexts that carry its hold
        self.longest_call_s = max(self.longest_call_s, time.monotonic() - call.started)
        if (call.tokens or call.usd) and self.budget is not None:
            self.budget.release(call.tokens, call.usd)
        self._give_back_own(call.own)
        return call

    def _ending(self, run_id: Any) -> _Call | None:
        """The call an end of ``run_id`` settles. Of several running under it (a config reused for calls at once),
        LangChain tells the end nothing that proves which (a context carrying a hold may be a copy another call's end
        is reported in): each of them is charged alike from now on, at the dearest price and longest estimate, and
        the one settled is the last this context carries, if any (so its task's end finds it settled), else any."""
        with self._lock:
            running = self._calls.get(run_id, [])
            if len(running) > 1:
                dearest, longest = max(running, key=lambda c: sum(c.price[1]) if c.price else -1), max(
                    c.estimate for c in running)
                for c in running:
                    c.model, c.price, c.estimate, c.alike = dearest.model, dearest.price, longest, True
            return next((c for c in reversed(_SENT_HERE.get()) if c in running), next(iter(running), None))

    def on_llm_end(self, response: LLMResult, *, run_id: Any = None, **kwargs: Any) -> None:
        self._end_call(run_id, response)

    def _end_call(self, run_id: Any, response: LLMResult, call: _Call | None = None,
                  abandoned: bool = False) -> tuple[int, float]:
        """Charge a call that ended, or was ``abandoned`` (:meth:`_abandon`); return its charge (tokens, USD)."""
        try:
            reported_in, reported_out, replied = _usage_of(response)
        except Exception:  # noqa: BLE001 - a report that cannot be read is none: the call is charged what it held
            reported_in, reported_out, replied = 0, 0, None
        call = self._release(run_id, call)
        reported_in, reported_out = token_count(reported_in), token_count(reported_out)
        budget = self.budget
        if call is None:  # a call whose start this meter did not see: its report is all there is
            call = _Call(self, None, unknown_model_price(self.prices or (budget.prices if budget else None)), 0, 0, 0.0)
        # A count far below the estimate is charged the estimate at the learned ratio; no count at all is
        # charged what the call held (16x before a ratio), failed or cancelled too (the provider may have read
        # it all), or a dense tokenizer would pass the limit unseen.
        learned = budget.learned(call.model) if budget is not None else None
        charged_in = reported_in
        if reported_in < call.estimate * MIN_TOKEN_SCALE:
            held = 0 if reported_in else call.tokens
            charged_in = max(held, math.ceil(call.estimate * (learned or 1.0)))
        replies = [getattr(g, "message", None) or getattr(g, "text", "") for gs in response.generations for g in gs]
        reply_estimate = estimate_tokens(replies)
        charged_out = reported_out if reported_out >= reply_estimate * MIN_TOKEN_SCALE else reply_estimate
        # Decided when it was sent; the reply's name only refines it to another priced name of the same model.
        priced = reply_price(self.prices or (budget.prices if budget else None), call.model, call.price, replied)
        for reply in replies[:1]:  # its estimate and price ride on its reply, for a checkpoint's read-back
            if isinstance(meta := getattr(reply, "response_metadata", None), dict):
                meta.update({ESTIMATE_KEY: call.estimate, PRICE_KEY: priced and priced[0]})
        out_usd = 0.0
        if abandoned:  # its provider may go on unseen: charged the most it may write, at its hold's price
            longest = max(DEFAULT_OUTPUT_BOUND, budget.longest_output.get(call.model, 0) if budget else 0)
            charged_out = call.output[0] or longest
            out_usd = charged_out * call.output[1] / 1_000_000
        elif budget is not None:
            with budget._lock:
                budget.longest_output[call.model] = max(charged_out, budget.longest_output.get(call.model, 0))
        cost = max(cost_at(priced, charged_in, charged_out), 0.0 if reported_in else call.usd + out_usd)
        if call.paid:  # charged what it held when its end did not come (_abandon): now what its report shows beyond
            paid, cost = call.paid[0], max(0.0, cost - call.paid[1])
            charged_in, charged_out = max(0, charged_in - paid), max(0, charged_out - max(0, paid - charged_in))
        with self._lock:
            self.input_tokens += reported_in
            self.output_tokens += reported_out
            self.charged_input_tokens += charged_in
            self.charged_output_tokens += charged_out
            self.cost_usd += cost
            if priced is not None:
                self.priced_as.add(priced[0])
        if budget is not None:
            budget.spend(charged_in + charged_out, cost)
        # Only a believed report teaches a ratio (the task's, the budget's): an estimate shows nothing of a tokenizer.
        if call.estimate and charged_in == reported_in and not (call.alike or call.paid):
            scale = learned_scale(call.estimate, charged_in)
            with self._lock:
                self._own_scale = max(scale, self._own_scale or scale)
            if budget is not None:
                budget.learn(call.model, call.estimate, charged_in)  # keyed as the next reservation will be
        return charged_in + charged_out, cost


_METERED_APART: contextvars.ContextVar[bool] = contextvars.ContextVar("subagents_metered_apart", default=False)
_TASK_METER: contextvars.ContextVar[TaskMeter | None] = contextvars.ContextVar("subagents_task_meter", default=None)
_METER_IN_FORCE: contextvars.ContextVar[TaskMeter | None] = contextvars.ContextVar("subagents_meter_in_force",
                                                                                   default=None)
# LangChain adds the meter in force (a child's, or the run's in a root tool) to every callback manager configured
# while it is set, where that handler is not already: a call given callbacks of its own is metered still, once.
register_configure_hook(_METER_IN_FORCE, inheritable=True)


def keep_child_exits() -> None:
    """Make a ``SystemExit`` (not a signal handler's), ``KeyboardInterrupt`` (no Ctrl-C) or ``GeneratorExit`` in a
    child's asyncio task a :class:`ChildExit` (asyncio would end the parent's run, or close the awaiting chain)."""
    loop = asyncio.get_running_loop()
    if getattr(factory := loop.get_task_factory(), "func", None) is not _exits_kept:
        loop.set_task_factory(functools.partial(_exits_kept, factory))


def _exits_kept(inner: Any, loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Future[Any]:
    if _TASK_METER.get() is not None and asyncio.iscoroutine(coro):
        coro = _exit_kept(coro)
    return inner(loop, coro, **kwargs) if inner else asyncio.Task(coro, loop=loop, **kwargs)


async def _exit_kept(coro: Awaitable[Any]) -> Any:
    try:
        return await coro
    except KeyboardInterrupt as exc:
        if is_ctrl_c():
            raise
        raise ChildExit(exc) from exc
    except (SystemExit, GeneratorExit) as exc:
        tb = exc.__traceback__
        # A signal handler's exit is the user's; a GeneratorExit raised right here, this coroutine being closed.
        if from_signal_handler(exc) or (isinstance(exc, GeneratorExit) and (tb is None or tb.tb_next is None)):
            raise
        raise ChildExit(exc) from exc


@contextlib.contextmanager
def _set(*pairs: tuple[contextvars.ContextVar[Any], Any]) -> Iterator[None]:
    tokens = [(var, var.set(value)) for var, value in pairs]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def metered_apart(meter: TaskMeter | None = None, *, child: bool = True) -> contextlib.AbstractContextManager[None]:
    """Model calls made inside are counted by ``meter`` (whatever callbacks they are given) or one of their own, so a
    :class:`RunMeter` leaves them alone; a ``child``'s meter is its model-call wrap's too (:func:`task_meter`)."""
    task = meter if child else None
    return _set((_METERED_APART, True), (_TASK_METER, task), (_METER_IN_FORCE, meter), (_NODE_METER, None))


def metered_in_tools(meter: RunMeter) -> contextlib.AbstractContextManager[None]:
    """Model calls made inside (a root tool's) are ``meter``'s, whatever callbacks they are given."""
    return _set((_METER_IN_FORCE, meter), (_NODE_METER, None))


def task_meter() -> TaskMeter | None:
    """The meter of the task whose child runs here (see :func:`metered_apart`), or ``None``."""
    return _TASK_METER.get()


class RunEnded(BudgetExceeded, ParentCommand):
    """A root middleware's own model call refused (a :class:`BudgetExceeded` its middleware may catch): left
    uncaught, LangGraph writes the node's ``command`` for it, the run's last message, and the run ends on it."""

    def __init__(self, refused: BudgetExceeded, command: Command[Any]) -> None:
        BudgetExceeded.__init__(self, str(refused), limit=refused.limit, spent=refused.spent, unit=refused.unit)
        self.args = (command,)  # what LangGraph reads of a ParentCommand
        self.message = str(refused)

    def __str__(self) -> str:
        return self.message


class RunMeter(TaskMeter):
    """The root graph's callback counting every model call no other meter counts (a root middleware's own); a refusal
    is a :class:`RunEnded` (the run ends on ``ended(refused)``). :attr:`in_tools` meters the root's tool step."""

    ignore_agent = True  # tool events: the root's tools are never this meter's to stop

    def __init__(self, budget: Budget, prices: PriceTable | None = None,
                 ended: Callable[[BudgetExceeded], BaseMessage] | None = None) -> None:
        super().__init__(budget=budget, prices=prices)
        self.alone_at_estimate = True  # a hook's calls run one after another: the first teaches the ratio
        self.ended = ended
        self.in_tools = TaskMeter(budget=budget, prices=prices)  # calls in (or nested in) the root's tool step
        self.in_tools._calls, self.in_tools._lock = self._calls, self._lock  # one set of holds: an end finds its own
        self._last_end: tuple[Any, Any] = (None, None)  # the run id and reply (or error) last ended: see _start_call
        _meter_node_calls()

    def _start_call(self, run_id: Any, prompt: Any, kwargs: dict[str, Any]) -> None:
        # A call is seen twice where it inherits this meter and _NodeMeter hands it over too: charged once, told by
        # the objects handed over (_sent_as, its end by its reply's), as its run id may be another call's too.
        sent = _sent_as(prompt, kwargs)
        seen = any(call.sent[0] is sent[0] and call.sent[1] is sent[1] for call in self._calls.get(run_id, ()))
        if not _METERED_APART.get() and not seen:
            # In a root tool, this meter is in force: a call given metadata of its own is the tool step's still.
            meter = self.in_tools if _METER_IN_FORCE.get() is self or in_tool_step(kwargs.get("metadata")) else self
            try:
                TaskMeter._start_call(meter, run_id, prompt, kwargs)
            except BudgetExceeded as refused:
                node = (kwargs.get("metadata") or {}).get("langgraph_node")
                if meter is not self or self.ended is None or not isinstance(node, str):
                    raise
                raise RunEnded(refused, Command(graph=node, update={"messages": [self.ended(refused)]})) from refused

    def _end_call(self, run_id: Any, response: LLMResult, call: _Call | None = None,
                  abandoned: bool = False) -> tuple[int, float]:
        # A call it saw start (any other is another meter's), counted by the meter that held it.
        call = call or self._ending(run_id)
        return (0, 0.0) if call is None else TaskMeter._end_call(call.meter, run_id, response, call, abandoned)

    def _first_end(self, run_id: Any, event: Any) -> bool:
        """Whether ``event`` (a call's reply or error) ends a call here, not one it already ended (see _start_call)."""
        with self._lock:
            last, self._last_end = self._last_end, (run_id, event)
        return last[1] is not event or last[0] != run_id

    def on_llm_end(self, response: LLMResult, *, run_id: Any = None, **kwargs: Any) -> None:
        if self._first_end(run_id, response):
            self._end_call(run_id, response)

    def on_llm_error(self, error: BaseException, *, run_id: Any = None, response: LLMResult | None = None,
                     **kwargs: Any) -> None:
        if self._first_end(run_id, error):
            self._end_call(run_id, response or LLMResult(generations=[]))  # as a child's (TaskMeter)


def run_meter_in(config: Mapping[str, Any] | None, budget: Budget | None = None) -> RunMeter | None:
    """The :class:`RunMeter` (of ``budget``, if given) among a runnable config's callbacks, or ``None``."""
    callbacks = (config or {}).get("callbacks")
    handlers = callbacks.handlers if isinstance(callbacks, BaseCallbackManager) else callbacks or []
    return next((h for h in handlers if isinstance(h, RunMeter) and (budget is None or h.budget is budget)), None)


def _forwarded(event: str) -> Callable[..., None]:
    """A :class:`_NodeMeter` handler handing a model ``event`` to the meter of the run it is made in."""
    def forward(self: _NodeMeter, *args: Any, run_id: Any, parent_run_id: Any = None, **kwargs: Any) -> None:
        if (meter := self._meter(parent_run_id)) is not None:
            getattr(meter, event)(*args, run_id=run_id, **kwargs)
    return forward


class _NodeMeter(BaseCallbackHandler):
    """Hands the run's meter a model call made in a metered node with callbacks of its own, which replace the run's
    (a root middleware's summariser given a tracer): the meter is in the node's config (no parent run), or followed
    from a run so started (with_retry, a chain), or the run whose context it is made in (with_fallbacks)."""

    raise_error = run_inline = True  # raising: the meter's refusal of an unpriced model is the call's
    ignore_agent = ignore_retriever = ignore_retry = ignore_custom_event = True

    def __init__(self) -> None:
        # A run started with its own callbacks in a metered node -> its meter, until the run ends: never evicted, as
        # a call in a run forgotten would go uncharged. LangChain reports every run's end (a cancelled one's, a
        # stream's closed or dropped unread), so it holds the runs open now. A dict: its pops are atomic.
        self._runs: dict[Any, RunMeter] = {}

    def _meter(self, parent_run_id: Any) -> RunMeter | None:
        if parent_run_id is not None:
            return self._runs.get(parent_run_id)
        # No parent: the context's config holds the meter (a node's), or its callbacks are a followed run's child's
        # (a nested runnable handing the inner call its caller's config: with_fallbacks, a lambda's own callbacks).
        config = var_child_runnable_config.get()
        return run_meter_in(config) or self._runs.get(getattr((config or {}).get("callbacks"), "parent_run_id", None))

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: Any, parent_run_id: Any = None,
                       **kwargs: Any) -> None:
        if (meter := self._meter(parent_run_id)) is not None:
            self._runs[run_id] = meter

    def on_chain_end(self, outputs: Any, *, run_id: Any, **kwargs: Any) -> None:
        self._runs.pop(run_id, None)

    def on_chain_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
        self._runs.pop(run_id, None)

    on_chat_model_start, on_llm_start = _forwarded("on_chat_model_start"), _forwarded("on_llm_start")
    on_llm_end, on_llm_error = _forwarded("on_llm_end"), _forwarded("on_llm_error")


_ONE_NODE_METER = _NodeMeter()
# The default, not a set value: every context and thread sees it, but where another meter is in force (metered_apart,
# metered_in_tools): its refusal would leave that event unawaited in LangChain's async manager (a RuntimeWarning).
_NODE_METER: contextvars.ContextVar[_NodeMeter | None] = contextvars.ContextVar("subagents_node_meter",
                                                                                default=_ONE_NODE_METER)


@functools.cache
def _meter_node_calls() -> None:
    """Add the :class:`_NodeMeter` to every callback manager LangChain configures from now on (once a process
    has a metered graph: none before, so an agent without a budget pays nothing)."""
    register_configure_hook(_NODE_METER, inheritable=True)


def in_tool_step(metadata: Mapping[str, Any] | None) -> bool:
    """Whether a model call (its callback ``metadata``) is made in, or nested in, a ``create_agent`` tool step:
    ``langgraph_checkpoint_ns`` (``<node>:<task id>|...``) has a ``tools`` step (a test guards the format)."""
    steps = str((metadata or {}).get("langgraph_checkpoint_ns", "")).split("|")
    return any(step.startswith("tools:") for step in steps)


@dataclasses.dataclass(eq=False)  # told apart by identity: two calls alike in every field are two holds
class _Call:
    """A model call's hold, made as it is sent: its price, estimate and holds, which its end settles (_ending)."""

    meter: TaskMeter  # the meter counting it (a RunMeter's own, or its tool step's)
    model: str | None
    price: tuple[str, tuple[float, float]] | None
    estimate: int
    tokens: int
    usd: float
    started: float = 0.0
    own: tuple[int, float] = (0, 0.0)  # what the task's own limits hold for it
    sent: tuple[Any, Any] = (None, None)  # see _sent_as
    output: tuple[int, float] = (0, 0.0)  # its output cap as sent (0: none) and its hold's output price (_abandon)
    paid: tuple[int, float] | None = None  # charged as abandoned (_abandon): what, until its end comes
    alike: bool = False  # its end cannot be told from another call's (_ending): it teaches no ratio


# The last calls sent in this context: of calls alike (_ending), an end reported here settles the last it carries.
_SENT_HERE: contextvars.ContextVar[tuple[_Call, ...]] = contextvars.ContextVar("subagents_sent_here", default=())


def _sent_as(prompt: Any, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """A call's prompt and invocation parameters as the objects LangChain hands every handler of its start (the
    parameters: one for every prompt of a batch), which tell it from another call its run id may name too."""
    return prompt[0] if isinstance(prompt, list) and len(prompt) == 1 else prompt, kwargs.get("invocation_params")


def _usage_of(response: LLMResult) -> tuple[Any, Any, str | None]:
    """A reply's reported input and output tokens (unchecked: see :func:`token_count`) and model name."""
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
                usage, name = dict(usage), meta.get("model_name") or llm_output.get("model_name")
                return usage.get("input_tokens"), usage.get("output_tokens"), name if isinstance(name, str) else None
    token_usage = llm_output.get("token_usage") or {}
    if token_usage and isinstance(token_usage, Mapping):
        name = llm_output.get("model_name")
        return (token_usage.get("prompt_tokens", 0), token_usage.get("completion_tokens", 0),
                name if isinstance(name, str) else None)
    return 0, 0, None


def dollars(value: Any) -> float:
    """A carried cost as a finite, non-negative float, else 0: ``dollars(float("nan")), dollars("1")  # 0.0, 0.0``."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return max(float(value), 0.0) if ok else 0.0


class TranscriptRecorder(BaseCallbackHandler):
    """Feeds a child's messages to one sink as its model calls happen. Only its own turns count: a call that
    continues the recorded history (a summariser's side call does not)."""

    def __init__(self, sink: TranscriptSink) -> None:
        self.sink = sink
        self._streams = getattr(sink, "streams", True)  # a sink whose add does nothing is not called per message
        self.messages: list[BaseMessage] = []
        self._ids: set[str] = set()
        self._turns: set[Any] = set()
        self._lock = threading.Lock()
        self._closed = False

    def _add(self, messages: list[BaseMessage]) -> None:
        with self._lock:
            for message in messages:
                if isinstance(message, SystemMessage) or message.id in self._ids:
                    continue
                if message.id is not None:
                    self._ids.add(message.id)
                self.messages.append(message)
                if self._streams and not self._closed:
                    self.sink.add(message)

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any, **kwargs: Any) -> None:
        history = [m for m in messages[0] if not isinstance(m, SystemMessage)]
        if self._ids and not any(m.id in self._ids for m in history):
            return
        self._turns.add(run_id)
        self._add(history)

    def on_llm_end(self, response: Any, *, run_id: Any, **kwargs: Any) -> None:
        if run_id in self._turns:
            self._add([g.message for gens in response.generations for g in gens if hasattr(g, "message")])

    def close(self, final_messages: list[BaseMessage] | None = None, *, cancelled: bool = False) -> str:
        """Add what the final state holds beyond the last model call; end the sink."""
        if final_messages:
            self._add(list(final_messages))
        with self._lock:
            self._closed = True
        return self.sink.end(self.messages, cancelled=cancelled)


def meter_for(sink: TranscriptSink | None) -> TaskMeter:
    """A task's one callback handler: a :class:`RecordingMeter` feeding ``sink`` when it records, else a meter."""
    return TaskMeter() if sink is None or not sink.records else RecordingMeter(TranscriptRecorder(sink))


class RecordingMeter(TaskMeter):
    """A :class:`TaskMeter` that first hands each model event to ``recorder``."""

    def __init__(self, recorder: TranscriptRecorder, **limits: Any) -> None:
        super().__init__(**limits)
        self.recorder = recorder

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any = None, **kwargs: Any) -> None:
        self._record(self.recorder.on_chat_model_start, "call", serialized, messages, run_id=run_id)
        self._start_call(run_id, messages, kwargs)

    def on_llm_end(self, response: LLMResult, *, run_id: Any = None, **kwargs: Any) -> None:
        self._record(self.recorder.on_llm_end, "answer", response, run_id=run_id)
        self._end_call(run_id, response)

    def _record(self, event: Callable[..., None], what: str, *args: Any, run_id: Any) -> None:
        try:  # the recorder reads no keyword but run_id: the others are not passed on (hot path)
            event(*args, run_id=run_id)
        except Exception as exc:  # noqa: BLE001 - the transcript's loss, not the child's
            log.warning("transcript recorder failed on a model %s: %r", what, exc)


def _wrap_up_setting(value: Any) -> bool | float:
    """A ``wrap_up`` setting as given, or ``ValueError`` saying what it may be (text such as ``"0.3"`` is not)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and 0 < value < 1:  # NaN and the infinities fail the comparison
        return float(value)
    raise SpecError(f"expected true, false or a share of timeout_s above 0 and below 1 (got {value!r:.80})")


WrapUpSetting = Annotated[bool | float, BeforeValidator(_wrap_up_setting)]
"""``True`` (on, with :data:`DEFAULT_WRAP_UP_SHARE`), ``False`` (off: every limit ends a task with an error),
or the share of ``timeout_s`` left at which the wrap-up call is made (above 0, below 1)."""

WRAP_UP_PROMPT = ("Last call: a limit is reached and no tools are left. Give your best final answer now, "
                  "from what you have, and say what is undone.")
"""What the wrap-up call adds after the conversation, as a user's message for that call only."""
_WRAP_UP_PROMPT_TOKENS = estimate_tokens([HumanMessage(WRAP_UP_PROMPT)]) - estimate_tokens(())


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


class WrapUp(ModelCallPlan, AgentMiddleware):
    """Limits end a task with an answer (docs/ledger-and-budgets.md): the limits line from a child's second call on,
    and on the last call a limit allows (:meth:`TaskMeter.last_call`) no tools, :data:`WRAP_UP_PROMPT` added."""

    child_policy = ChildPolicy(model_call_only=True, keeps_model=True)

    def model_plan(self, request: ModelRequest[Any]) -> Generator[Any, ModelResponse[Any], ModelResponse[Any]]:
        meter = task_meter()
        # Not run by the runner, wrap-ups off, or no tools to take away: each call could be the answer already.
        if meter is None or meter.wrap_up in (None, False) or not request.tools:
            return _noted((yield request), False)
        # Not on the first call: a small model's first tool arguments change with any line more.
        request = with_prompt_block(request, meter.limits_line() if meter.model_calls else "")
        # Estimated as the meter will, only under a token or dollar limit.
        estimate = 0
        if meter.max_tokens is not None or meter.max_usd is not None or meter.budget is not None:
            extras = meter.extras_estimate
            if extras is None:  # the first call: its tool schemas, as TaskMeter._sent counts them
                schemas = [tool if isinstance(tool, dict) else convert_to_openai_tool(tool) for tool in request.tools]
                extras = prompt_estimate((), {"tools": schemas}) - estimate_tokens(())
            estimate = estimate_tokens([request.system_message, *request.messages]) + extras
        name = getattr(request.model, "model_name", None) or getattr(request.model, "model", None)
        stop = meter.last_call(estimate, name if isinstance(name, str) and name else None)
        if stop is None:
            return _noted((yield request), False)
        if isinstance(stop, MaxTurnsReached) and meter.model_calls >= stop.max_turns and meter.wrapped_up is None:
            # Other calls (a tool's, a middleware's, metered as the child's) took the turns left: the task ends on
            # its last answer (none: the limit's error) as the wrap-up's, so a later call (a hook's jump) is refused.
            meter.wrapped_up, meter._wrap_up_sent = stop, True
            said = next((m.text for m in reversed(request.messages) if isinstance(m, AIMessage) and m.text), "")
            return ModelResponse(result=[AIMessage(content=said)])
        meter.wrapped_up, meter.said = stop, ""  # said from now on: the wrap-up's answer, or none
        # Last, as a user's turn: a small model heeds the end of its prompt, not a system line far above.
        return _noted((yield request.override(messages=[*request.messages, HumanMessage(WRAP_UP_PROMPT)], tools=[],
                                              tool_choice=None)), True)


def _noted(response: ModelResponse[Any], wrapping: bool) -> ModelResponse[Any]:
    """``response``, its text noted on the meter (the answer if a limit refuses a call); if ``wrapping``, without
    tool calls (none may run) but those it answers itself (a structured answer's)."""
    if wrapping:
        answered = {m.tool_call_id for m in response.result if isinstance(m, ToolMessage)}
        result = []
        for message in response.result:
            if isinstance(message, AIMessage):
                kept = [call for call in message.tool_calls if call["id"] in answered]
                if len(kept) < len(message.tool_calls) or message.invalid_tool_calls:
                    message = message.model_copy(update={"content": message.text, "tool_calls": kept,
                                                         "invalid_tool_calls": []})
            result.append(message)
        response = ModelResponse(result=result, structured_response=response.structured_response)
    meter = task_meter()
    said = next((m.text for m in reversed(response.result) if isinstance(m, AIMessage) and m.text), "")
    if meter is not None and said:
        meter.said = said
    return response
