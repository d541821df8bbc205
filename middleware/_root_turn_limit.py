"""A cap on the root's own model calls in one run (:class:`RootTurnLimit`; docs/local-models.md), and the shared
budget on them. Counted in ``wrap_model_call``: a ``before_model`` hook is a node and a checkpoint more."""

from __future__ import annotations

import collections
import contextlib
import warnings
from collections.abc import Callable, Generator, Iterator
from typing import Annotated, Any, NotRequired, TypeVar

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse, ModelCallResult, PrivateStateAttr, ResponseT
from langchain_core.messages import AIMessage
from langgraph.channels.untracked_value import UntrackedValue
from langgraph.config import get_config
from langgraph.pregel import Pregel
from langgraph.types import Command
from langgraph.typing import ContextT

from middleware._limits import last_ai
from subagents._errors import BudgetExceeded, MaxTurnsReached
from subagents._metering import Budget, PriceTable, RunMeter, TaskMeter, metered_apart, metered_in_tools, run_meter_in
from subagents._outcome import limit_stop, stopped_by_limit
from subagents._plans import ModelCallPlan
from subagents._settings import Limits

COUNT_KEY = "run_model_call_count"


class RootTurnLimitState(AgentState[ResponseT]):
    """The run's model calls so far: not checkpointed, private to the agent that owns it."""

    run_model_call_count: NotRequired[Annotated[int, UntrackedValue, PrivateStateAttr]]


class RootTurnLimit(ModelCallPlan, AgentMiddleware[RootTurnLimitState, ContextT, ResponseT]):
    """Ends the root's run, with a final AI message saying why (signed ``name``), instead of its model call once it
    has made ``max_root_turns``, counted per ``invoke`` and per resume: ``middleware=[RootTurnLimit(50)]``."""

    state_schema = RootTurnLimitState

    def __init__(self, max_root_turns: int, *, name: str | None = None) -> None:
        super().__init__()
        self.max_root_turns: int = Limits(max_root_turns=max_root_turns).max_root_turns  # type: ignore[assignment]
        self.agent_name = name

    def model_plan(self, request: ModelRequest[ContextT]
                   ) -> Generator[ModelRequest[ContextT], ModelResponse[ResponseT], ModelCallResult[ResponseT]]:
        # A caller's Command(update=...) can write the count too: a negative count (or none) would buy calls past
        # the limit, so it reads as none made yet.
        made = (request.state or {}).get(COUNT_KEY)
        made = max(made, 0) if isinstance(made, int) and not isinstance(made, bool) else 0
        if made >= self.max_root_turns:  # marked as the limit's: a blocking Stop hook does not send the run back
            return limit_stop(
                f"Stopped: this run reached max_root_turns={self.max_root_turns} model calls of the agent "
                "without a final answer. Ask again with a narrower request, or raise max_root_turns.",
                "max_root_turns", self.agent_name)
        # The model's reply, with this call counted in the run's state (LangChain applies the update).
        return ExtendedModelResponse(model_response=(yield request), command=Command(update={COUNT_KEY: made + 1}))


GraphT = TypeVar("GraphT", bound="Pregel[Any, Any, Any, Any]")

UNMETERED = ("A SubAgentMiddleware with a budget counts the root's model calls and its children's; a model call "
             "another middleware of the root makes itself (a summariser's in before_model, a critic's) is "
             "counted (whatever callbacks it is given) only when the graph runs with the budget's meter: run "
             "middleware.metered(graph) (create_deep_agent does). No middleware can add it to a run of a graph "
             "it is part of.")


class RootBudget:
    """The shared budget on the root's model calls, in its model-call wrap (``name`` signs the limit's message)."""

    def __init__(self, budget: Budget, *, prices: PriceTable | None = None, name: str | None = None) -> None:
        self.budget, self.prices, self.agent_name = budget, prices, name
        self._unmetered_said = False
        # The model steps (by checkpoint namespace, the newest kept) that made their last call: a middleware that
        # calls the model again in that step (a retry, a fallback) gets the end, not another call past the limit.
        self._last_called: collections.OrderedDict[str, None] = collections.OrderedDict()

    def metered(self, graph: GraphT) -> GraphT:
        """``graph`` run with the :class:`~subagents._metering.RunMeter` counting a root middleware's own calls."""
        return graph.with_config(callbacks=[RunMeter(self.budget, self.prices, lambda refused: self._ended(
            None, str(refused)))])

    def in_tools(self) -> contextlib.AbstractContextManager[None]:
        """Around a root tool call: the run's meter counts its model calls, those with callbacks of their own too."""
        meter = run_meter_in(get_config(), self.budget)  # the tool node's: the run's meter is inherited there
        return contextlib.nullcontext() if meter is None else metered_in_tools(meter)

    def plan(self, request: ModelRequest[ContextT], then: Callable[[ModelRequest[ContextT]], Generator[
             Any, Any, ModelCallResult[ResponseT]]]) -> Generator[Any, Any, ModelCallResult[ResponseT]]:
        """The root's model call, made by ``then``'s plan, under the budget (a plan for :mod:`subagents._plans`)."""
        last = request.messages[-1] if request.messages else None
        if isinstance(last, AIMessage) and stopped_by_limit(last) == "budget":
            return last  # the run ends on the budget's stop, which replaces itself
        if self.budget.spent_error(foreseen=True) is None:
            with self._metered(refuses=True) as meter:
                response = yield from then(request)
                if not isinstance(meter.stopped_by, BudgetExceeded):  # refused inside, a retry's answer: the end
                    return response
        step = (get_config().get("metadata") or {}).get("langgraph_checkpoint_ns")
        if any(stopped_by_limit(m) == "budget" for m in request.messages) or step in self._last_called:
            return self._ended(None)  # spent, and it had its last call: a middleware sent the run back to the model
        if isinstance(step, str):
            self._last_called[step] = None
            while len(self._last_called) > 1024:
                self._last_called.popitem(last=False)
        with self._metered(refuses=False) as meter:  # an answer in words: no tool, structured output's included
            return self._ended((yield from then(request.override(tools=[], tool_choice=None, response_format=None))))
        refused = meter.stopped_by  # no price for the model, or a second call: the end, not another call
        return self._ended(None, None if isinstance(refused, MaxTurnsReached) else str(refused))

    @contextlib.contextmanager
    def _metered(self, *, refuses: bool) -> Iterator[TaskMeter]:
        """A meter of the call's own for every model call made inside; its own refusal is swallowed."""
        if not self._unmetered_said:  # once: whether the run's meter counts its middleware's own calls
            self._unmetered_said = True
            if run_meter_in(get_config(), self.budget) is None:
                warnings.warn(UNMETERED, UserWarning, stacklevel=1)
        meter = TaskMeter(budget=self.budget, prices=self.prices)
        meter.refuses = refuses
        # The last call past a spent budget is one call: a middleware inside that calls again (a retry after it
        # failed, a fallback model) is refused, and the run ends on the limit's message.
        meter.max_turns = None if refuses else 1
        meter.alone_at_estimate = True  # the root's calls run alone: the first teaches its model's ratio
        try:  # handed to every model call made inside, so the call actually sent (a fallback's) is charged
            with metered_apart(meter, child=False):
                yield meter
        except (BudgetExceeded, MaxTurnsReached) as refused:
            if meter.stopped_by is not refused:
                raise

    def _ended(self, response: ModelCallResult[ResponseT] | None, refused: str | None = None) -> AIMessage:
        """The run's last message: the model's answer (if it gave one), then why the run ends."""
        answer = None if response is None else last_ai(response)
        text = (answer.text or "").strip() if answer is not None else ""
        spent = refused or self.budget.exhausted() or "the shared budget cannot cover another call"
        note = (f"Stopped: {spent}. This run's model calls end here; raise the Budget's limit "
                "or reset it to go on.")
        # Marked as the limit's, and without tool calls, so the run ends on it; it carries the last call's usage.
        stop = limit_stop(f"{text}\n\n{note}" if text else note, "budget", self.agent_name)
        stop.usage_metadata = answer.usage_metadata if answer is not None else None
        return stop

