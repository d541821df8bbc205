"""A reply cut at the model's output token limit, asked for once more.

With ``retry_truncated``, a child's model call whose reply was cut short is made once more, in place of the cut
reply: ``"more_tokens"`` with twice the token limit it hit, ``"brief"`` asking for a brief, complete answer (for
servers that cap replies, as llama.cpp's ``--n-predict``), ``True`` both. Both calls count; the kept reply carries
:data:`~subagents._outcome.TRUNCATED_RETRY_KEY`. A failed retry leaves the cut reply, marked with the error. A
wrap-up's reply is never retried.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Generator
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import AIMessage, HumanMessage
from pydantic import StrictBool

from subagents._errors import SpecError, safe_text
from subagents._metering import task_meter
from subagents._outcome import TRUNCATED_RETRY_KEY, cut_short
from subagents._plans import ModelCallPlan
from subagents._roles import ChildPolicy

log = logging.getLogger(__name__)

RetryTruncatedSetting = StrictBool | Literal["brief", "more_tokens"]
"""``False`` (off), ``True`` (more tokens and a brief answer), ``"brief"`` or ``"more_tokens"``."""

BRIEF_PROMPT = ("Your reply was cut off at the output token limit. Reply again, briefly: "
                "only what is needed, complete, in as few words as you can.")  # added for that call only

TOKEN_FACTOR = 2  # How many times the limit it hit a "more_tokens" retry may use.


class RetryTruncated(ModelCallPlan, AgentMiddleware):
    """Makes a model call whose reply was cut at the token limit once more (see the module docstring): ``how``
    is ``True``/``"both"`` (more tokens and a brief answer), ``"brief"`` or ``"more_tokens"``."""

    name = "RetryTruncated"
    child_policy = ChildPolicy(model_call_only=True)  # it may retry, never swap the model: not keeps_model

    def __init__(self, how: RetryTruncatedSetting | Literal["both"] = True) -> None:
        super().__init__()
        if how not in (True, "both", "brief", "more_tokens"):
            raise SpecError(f"retry_truncated: expected true, false, 'brief' or 'more_tokens', got {how!r}")
        self.brief = how in (True, "both", "brief")
        self.more_tokens = how in (True, "both", "more_tokens")

    def model_plan(self, request: ModelRequest[Any]) -> Generator[ModelRequest[Any], Any, Any]:
        first = yield request  # the first call's failure is the caller's, as without this middleware
        cut = _reply(first)
        meter = task_meter()
        # A wrap-up's reply is the last call its limit allows: cut or not, it is the task's answer.
        if cut is None or not cut_short({"messages": [cut]}) or (meter is not None and meter.wrapped_up):
            return first
        limit = self._limit(request, cut)
        max_tokens = TOKEN_FACTOR * limit if self.more_tokens and limit is not None else None
        brief = self.brief or max_tokens is None  # no limit known: a brief answer is what is left to ask
        retry = request
        if max_tokens is not None:
            retry = retry.override(model_settings={**request.model_settings, "max_tokens": max_tokens})
        if brief:
            retry = retry.override(messages=[*request.messages, HumanMessage(BRIEF_PROMPT)])
        asked = {"max_tokens": max_tokens, "brief": brief}
        try:
            second = yield retry
        except Exception as exc:  # noqa: BLE001 - the cut reply is still an answer
            log.warning("a retry of a reply cut at the token limit failed (%s); the cut reply is kept",
                        safe_text(exc, 200))
            return _marked(first, {**asked, "error": safe_text(exc, 500)})
        return _marked(second, asked)

    @staticmethod
    def _limit(request: ModelRequest[Any], cut: AIMessage) -> int | None:
        """The output token limit the cut reply hit, as well as it can be told."""
        for value in (request.model_settings.get("max_tokens"), getattr(request.model, "max_tokens", None),
                      cut.usage_metadata["output_tokens"] if cut.usage_metadata else None):
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return None


def _reply(response: Any) -> AIMessage | None:
    messages = getattr(response, "result", None) or ()
    return next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)


def _marked(response: Any, retry: dict[str, Any]) -> Any:
    """The response with its reply carrying the retry in ``response_metadata`` (a copy; the reply is shared)."""
    reply = _reply(response)
    if reply is None:
        return response
    marked = reply.model_copy(update={"response_metadata": {**reply.response_metadata, TRUNCATED_RETRY_KEY: retry}})
    return dataclasses.replace(response, result=[marked if m is reply else m for m in response.result])
