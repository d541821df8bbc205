"""Driving a plan written once: a generator that yields each call to make and receives its result (or
exception); :func:`drive` or :func:`adrive` make the calls, and the plan's return value is the answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

Step = TypeVar("Step")
Result = TypeVar("Result")


def drive(plan: Generator[Step, Any, Result], call: Callable[[Step], Any]) -> Result:
    """Make each call the plan asks for on this thread; return what the plan returns."""
    try:
        step = next(plan)
        while True:
            try:
                result, failure = call(step), None
            except BaseException as exc:  # noqa: BLE001 - the plan decides; an interrupt leaves its `with` blocks
                result, failure = None, exc
            step = plan.send(result) if failure is None else plan.throw(failure)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def adrive(plan: Generator[Step, Any, Result], call: Callable[[Step], Awaitable[Any]]) -> Result:
    """:func:`drive`, awaiting each call (a cancellation is thrown into the plan as any failure is)."""
    try:
        step = next(plan)
        while True:
            try:
                result, failure = await call(step), None
            except BaseException as exc:  # noqa: BLE001 - the plan decides
                result, failure = None, exc
            step = plan.send(result) if failure is None else plan.throw(failure)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


class ModelCallPlan:
    """A middleware's ``wrap_model_call`` and ``awrap_model_call`` written once, as :meth:`model_plan`: it yields
    each request to send (to the handler) and returns the reply (listed before ``AgentMiddleware`` in the bases)."""

    def model_plan(self, request: Any) -> Generator[Any, Any, Any]:
        raise NotImplementedError

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return drive(self.model_plan(request), handler)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await adrive(self.model_plan(request), handler)
