"""What a tree of agents may spend: prices, and a budget shared by the whole tree.

Example::

    from subagents import Budget

    prices = {"gpt-4.1-mini": (0.40, 1.60)}        # USD per million input, output tokens
    budget = Budget(max_tokens=200_000, max_usd=0.50, prices=prices)
    agent = create_deep_agent(model, subagents=specs, budget=budget)

One ``Budget`` object counts everything that uses it: the parent's own model
calls and every child's, parallel ones included. Use a fresh one per run, or
call :meth:`Budget.reset`. Once it is spent, new delegations are refused
with an error result and running children stop at their next model call;
the parent itself may still answer.
"""

from __future__ import annotations

import decimal
import math
import numbers
import threading
from collections.abc import Mapping
from typing import Any

from subagents._errors import StopReason, SubagentError

PriceTable = Mapping[str, tuple[float, float]]
"""Model name -> (USD per million input tokens, USD per million output tokens)."""

MAX_REPORTED_TOKENS = 10**15
"""The most tokens one reported count is taken for: past any limit, and still exact as a float."""


def token_count(value: Any) -> int:
    """A token count a model or server reported, as a non-negative ``int`` that is safe to add.

    Usage comes from whatever answered the call, so it is not trusted: a
    number (an integer-valued string of any length, a ``Decimal`` or
    ``Fraction`` however large) is clamped to ``0..MAX_REPORTED_TOKENS``;
    anything else (``None``, ``NaN``, an infinity, other text, a bool)
    counts as 0. A negative count never gives a budget back.
    """
    if type(value) is int:  # the usual count, before the checks for every other kind (a bool is no count)
        return min(max(value, 0), MAX_REPORTED_TOKENS)
    if isinstance(value, bool):
        return 0
    if isinstance(value, str):
        text = value.strip()
        if not (text.isascii() and text.isdigit()):
            return 0
        digits = text.lstrip("0") or "0"
        return MAX_REPORTED_TOKENS if len(digits) > 16 else min(int(digits), MAX_REPORTED_TOKENS)
    if isinstance(value, numbers.Integral):
        number = int(value)
    elif isinstance(value, (numbers.Real, decimal.Decimal)):
        real: Any = value  # compared before converting: a huge Fraction or Decimal does not fit a float
        try:
            if real != real or abs(real) == math.inf:  # NaN, or an infinity: no count at all
                return 0
            if real >= MAX_REPORTED_TOKENS:
                return MAX_REPORTED_TOKENS
            number = int(real) if real > 0 else 0
        except (ArithmeticError, TypeError, ValueError):  # a signalling NaN, for one
            return 0
    else:
        return 0
    return min(max(number, 0), MAX_REPORTED_TOKENS)


def cost_of(prices: PriceTable | None, model_name: str | None, input_tokens: int, output_tokens: int) -> float:
    """The USD cost of one call, or 0.0 when the model has no price."""
    if not prices or not isinstance(model_name, str) or not model_name:
        return 0.0
    price = prices.get(model_name)
    if price is None:
        # Provider names often carry a date suffix: "gpt-4.1-mini-2025-04-14".
        # The longest matching key wins, so "gpt-4.1-mini" beats "gpt-4.1".
        matches = [name for name in prices if model_name.startswith(name)]
        if not matches:
            return 0.0
        price = prices[max(matches, key=len)]
    return (token_count(input_tokens) * price[0] + token_count(output_tokens) * price[1]) / 1_000_000


def check_prices(prices: Any, *, argument: str = "prices") -> dict[str, tuple[float, float]]:
    """A price table as ``{model: (input, output)}`` USD per million tokens, or ``ValueError`` naming the entry."""
    if prices is None:
        return {}
    if not isinstance(prices, Mapping):
        raise ValueError(f"{argument}: expected a mapping of model name to (input, output) prices")
    try:
        items = list(prices.items())
    except Exception as exc:  # noqa: BLE001 - a hostile mapping is bad input, named as such
        raise ValueError(f"{argument}: could not be read ({type(exc).__name__})") from None
    checked: dict[str, tuple[float, float]] = {}
    for name, pair in items:
        ok = (isinstance(pair, (tuple, list)) and len(pair) == 2
              and all(isinstance(p, (int, float)) and not isinstance(p, bool) and 0 <= p < float("inf")
                      for p in pair))
        if not ok:
            raise ValueError(f"{argument}[{str(name)[:80]!r}]: expected two non-negative numbers "
                             "(USD per million input tokens, output tokens)")
        checked[str(name)] = (float(pair[0]), float(pair[1]))
    return checked


class BudgetExceeded(SubagentError):
    """Raised inside a child, or returned for a refused delegation, once spent."""

    stop_reason: StopReason = "budget"


def estimate_tokens(payload: Any) -> int:
    """A cheap upper-leaning guess of a prompt's tokens (about four characters a token)."""
    chars = 0
    stack = [payload]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            chars += len(item)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        else:
            content = getattr(item, "content", None)
            if content is not None:
                stack.append(content)
            calls = getattr(item, "tool_calls", None)
            if calls:
                stack.extend(str(c.get("args", "")) for c in calls)
    return chars // 4 + 1


class Budget:
    """Tokens and/or USD shared by a parent and all its children."""

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        max_usd: float | None = None,
        prices: PriceTable | None = None,
    ) -> None:
        # A NaN limit would compare false forever (a budget that never stops), a bool or text is a slip.
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                       or max_tokens <= 0):
            raise ValueError(f"Budget: max_tokens must be positive, a whole number of tokens (got {max_tokens!r:.80})")
        if max_usd is not None and (isinstance(max_usd, bool) or not isinstance(max_usd, (int, float))
                                    or not 0 < max_usd < float("inf")):
            raise ValueError(f"Budget: max_usd must be positive, a finite number of US dollars (got {max_usd!r:.80})")
        if max_usd is not None and not prices:
            raise ValueError("max_usd needs a price table: pass prices={model: (in, out)}")
        self.max_tokens = max_tokens
        self.max_usd = max_usd
        self.prices = check_prices(prices)
        self._lock = threading.Lock()
        self.tokens = 0
        self.usd = 0.0
        self.reserved = 0

    def reserve(self, tokens: int, model_name: str | None = None) -> None:
        """Hold ``tokens`` of prompt for a model call about to start, or raise :class:`BudgetExceeded`.

        A call is refused when what is spent, plus what running calls have
        reserved, plus this prompt would pass the limit; so parallel children
        overshoot by at most one call's output each.
        """
        cost = cost_of(self.prices, model_name, tokens, 0)
        with self._lock:
            if reason := self._spent_reason():
                raise BudgetExceeded(reason)
            if self.max_tokens is not None and self.tokens + self.reserved + tokens > self.max_tokens:
                raise BudgetExceeded(
                    f"the shared token budget cannot cover another call ({self.tokens} spent, "
                    f"{self.reserved} held by running calls, ~{tokens} more needed, "
                    f"limit {self.max_tokens})"
                )
            if self.max_usd is not None and self.usd + cost > self.max_usd:
                raise BudgetExceeded(
                    f"the shared budget cannot cover another call (${self.usd:.4f} spent, "
                    f"~${cost:.4f} more needed, limit ${self.max_usd:.4f})"
                )
            self.reserved += tokens

    def release(self, tokens: int) -> None:
        """Give back a reservation once its call has ended (its real usage is charged)."""
        with self._lock:
            self.reserved = max(0, self.reserved - tokens)

    def _spent_reason(self) -> str | None:
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            return f"the shared token budget is spent ({self.tokens}/{self.max_tokens} tokens)"
        if self.max_usd is not None and self.usd >= self.max_usd:
            return f"the shared budget is spent (${self.usd:.4f}/${self.max_usd:.4f})"
        return None

    def charge(self, model_name: str | None, input_tokens: Any, output_tokens: Any) -> float:
        """Add one call's usage (as reported: see :func:`token_count`); return its cost."""
        input_tokens, output_tokens = token_count(input_tokens), token_count(output_tokens)
        cost = cost_of(self.prices, model_name, input_tokens, output_tokens)
        with self._lock:
            self.tokens += input_tokens + output_tokens
            self.usd += cost
        return cost

    def exhausted(self) -> str | None:
        """Why the budget is spent, or ``None`` while it is not."""
        return self._spent_reason()

    def reset(self) -> None:
        with self._lock:
            self.tokens = 0
            self.usd = 0.0
            self.reserved = 0

    def snapshot(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "usd": round(self.usd, 6),
                "max_tokens": self.max_tokens, "max_usd": self.max_usd}
