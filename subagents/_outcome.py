"""What goes into one delegation (:class:`TaskCall`) and what comes out of it (:class:`TaskOutcome`, the
:class:`TaskRecord`, the child's answer); and :func:`limit_stop`, the final message a run's limit writes,
marked (:func:`stopped_by_limit`) so a blocking ``Stop`` hook does not send the run back to a refused call."""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import itertools
import json
import math
import operator
import threading
import time
import unicodedata
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, cast

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from pydantic import BaseModel, ConfigDict

from subagents._errors import SpecError, StopReason
from subagents._metering import dollars, token_count
from subagents._transcripts import NO_TRANSCRIPT

TASK_ID_METADATA_KEY = "subagent_task_id"
"""Set in the metadata of every child run; its presence means "inside a child"."""

TaskStatus = Literal["pending", "running", "waiting_for_approval", "completed", "error", "cancelled", "lost"]

_TASK_ID_NAMESPACE = uuid.UUID("6f1c1c1e-2b8e-4d3e-9d0a-5a2f1f0c7e11")
_TASK_ID_PREFIX = _TASK_ID_NAMESPACE.bytes


@dataclasses.dataclass(frozen=True)
class TaskCall:
    """One ``task`` call as the parent's tool received it."""

    subagent_type: str
    description: str
    parent_state: Mapping[str, Any]
    tool_call_id: str | None
    parent_config: Mapping[str, Any]
    parent_model: Any = None
    parent_tools: Sequence[Any] = ()
    emit: Callable[[dict[str, Any]], None] | None = None
    """Where lifecycle events go (the parent's ``custom`` stream writer)."""
    store: Any = None
    """The parent's ``BaseStore``, for the store transcript sink."""
    graph: Any = None
    """Run this instead of the registry's graph (a background task's own session)."""
    output_schema: Any = None
    """A per-call output schema (``task``'s ``output_schema``; see :mod:`subagents._builder`)."""

    @classmethod
    def from_runtime(cls, runtime: Any, subagent_type: str, description: str, *, parent_model: Any,
                     parent_tools: Sequence[Any] | None = None, output_schema: Any = None) -> TaskCall:
        """The call a delegation tool received, from its ``ToolRuntime`` (``parent_tools``: its tool node's)."""
        return cls(subagent_type=subagent_type, description=description, parent_state=runtime.state,
                   tool_call_id=runtime.tool_call_id, parent_config=runtime.config, parent_model=parent_model,
                   parent_tools=runtime.tools if parent_tools is None else parent_tools, emit=runtime.stream_writer,
                   store=runtime.store, output_schema=output_schema)


def lost(error: str, transcript: str | None = None) -> dict[str, Any]:
    """The fields of a delegation whose run stopped (its process ended, its runtime closed) before it ended."""
    return {"status": "lost", "stop_reason": "cancelled", "error": error, "finished_at": time.time(),
            "transcript": transcript or NO_TRANSCRIPT}


class TaskRecord(BaseModel):
    """One delegation: who ran it, how it went, what it cost, what it returned.

    Stored as a JSON-ready dict (``TaskRecord.model_validate(record)`` reads it back). In the ledger,
    ``description`` and ``result`` are 200-character previews (``error`` 1,000), full lengths in ``*_chars``."""

    model_config = ConfigDict(extra="allow")

    id: str
    agent_type: str
    tool_call_id: str | None = None
    status: TaskStatus
    stop_reason: StopReason | None = None
    description: str
    result: str | None = None
    error: str | None = None
    started_at: float
    finished_at: float | None = None
    duration_ms: float | None = None
    """Work time: every segment the task ran, without the time it waited for approval."""
    waiting_ms: float = 0.0
    """Time the task spent paused for approval (``finished_at - started_at`` is both)."""
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    transcript: str | None = None
    """Where the child's messages can be read back (see :mod:`subagents._transcripts`)."""
    transcript_error: str | None = None
    """Why the transcript was lost (an unwritable ``sessions_dir``, a failing store), when it was."""
    skipped_writes: dict[str, str] | None = None
    """State keys the child changed that were not written back, and why."""
    description_chars: int | None = None
    """The full description's length (in the ledger, ``description`` may be a preview)."""
    result_chars: int | None = None
    """The full answer's length (in the ledger, ``result`` may be a preview)."""
    error_chars: int | None = None
    """The full error's length, when the ledger's ``error`` is a preview."""
    truncated_retries: int = 0
    """Replies cut at the token limit that were asked for once more (``retry_truncated``)."""
    partial: bool = False
    """A limit (``stop_reason``) cut the task short; ``result`` is its wrap-up's answer (see ``WrapUp``)."""


def refused_record(task_id: str, agent_type: str, tool_call_id: str | None, description: str, error: str,
                   stop_reason: StopReason) -> dict[str, Any]:
    """The record of a delegation refused before any child ran: no time, no usage, and an empty transcript."""
    now = time.time()
    return TaskRecord(id=task_id, agent_type=agent_type, tool_call_id=tool_call_id, status="error",
                      stop_reason=stop_reason, description=description, error=error, started_at=now,
                      finished_at=now, duration_ms=0.0, transcript=NO_TRANSCRIPT).model_dump()


@dataclasses.dataclass
class TaskOutcome:
    """What one delegation produced; ``changes`` (the keys the child changed) and ``inputs`` (what it was
    given) let the caller write back deltas (:func:`subagents._boundary.write_back`)."""

    record: dict[str, Any]
    answer: str | None = None
    error: str | None = None
    changes: dict[str, Any] = dataclasses.field(default_factory=dict)
    inputs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    events: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.error is not None


def task_id_for(thread_id: Any, checkpoint_ns: str, tool_call_id: str | None) -> str:
    """A task id unique per tool call and stable on resume (the tool task re-runs in the same namespace)."""
    # uuid5 spelled out (its UUID object costs several times the hash on the hot path); same ids.
    # surrogatepass: a call id holding a lone surrogate (a broken server's) still names one task.
    key = f"{thread_id}|{checkpoint_ns}|{tool_call_id}".encode(errors="surrogatepass")
    digest = bytearray(hashlib.sha1(_TASK_ID_PREFIX + key, usedforsecurity=False).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    return digest.hex()


USAGE_COUNTS = ("model_calls", "input_tokens", "output_tokens", "tasks")  # a rollup's counts, beside cost_usd


def add_usage(left: Any, right: Any) -> dict[str, Any]:
    """Reducer for a usage rollup: parallel delegations add up. Either side may come from outside, so each
    figure is read as :func:`~subagents._metering.token_count` and :func:`~subagents._metering.dollars` read
    one (a non-mapping: no usage): a crafted value can neither crash a later write nor make it negative or NaN."""
    mine, theirs = _usage_figures(left), _usage_figures(right)
    if mine is _NO_USAGE or theirs is _NO_USAGE:  # the first delegation of a thread, or nothing added
        return dict(theirs if mine is _NO_USAGE else mine)
    summed: dict[str, Any] = {k: min(mine[k] + theirs[k], MAX_ROLLUP_COUNT) for k in USAGE_COUNTS}
    summed["cost_usd"] = round(mine["cost_usd"] + theirs["cost_usd"], 6)
    return summed


MAX_ROLLUP_COUNT = 2**53 - 1  # the largest count a rollup holds: exact as a float, for any serializer


_USAGE_FIELDS = frozenset((*USAGE_COUNTS, "cost_usd"))
_usage_values = operator.itemgetter(*USAGE_COUNTS, "cost_usd")
_NO_USAGE: dict[str, Any] = {**dict.fromkeys(USAGE_COUNTS, 0), "cost_usd": 0.0}


def _usage_figures(value: Any) -> dict[str, Any]:
    """``value``'s figures, each a count or a dollar amount the rollup can add (read only: never changed)."""
    if not value:  # the channel's first value, or none
        return _NO_USAGE
    if type(value) is dict and value.keys() == _USAGE_FIELDS:
        # The runner's own figures, every delegation: checked in C-level steps, and used as they are.
        *counts, usd = _usage_values(value)
        if (set(map(type, counts)) == {int} and min(counts) >= 0 and max(counts) <= MAX_ROLLUP_COUNT
                and type(usd) is float and 0.0 <= usd < math.inf):
            return cast("dict[str, Any]", value)
    figures = dict(_NO_USAGE)
    if isinstance(value, Mapping):
        for key in USAGE_COUNTS:
            count: Any = value.get(key, 0)
            figures[key] = count if type(count) is int and 0 <= count <= MAX_ROLLUP_COUNT else token_count(count)
        cost: Any = value.get("cost_usd", 0.0)
        figures["cost_usd"] = float(cost) if type(cost) in (int, float) and 0 <= cost < math.inf else dollars(cost)
    return figures


def final_answer(result: Mapping[str, Any]) -> str:
    """The child's answer: its structured response as JSON, else the text of the tool results it ended on
    (a ``return_direct`` tool's, joined by blank lines), else its last non-empty AI text."""
    if not isinstance(result, Mapping) or "messages" not in result:
        raise SpecError("the child graph returned no 'messages' "
                        "(a compiled subagent's state must have a 'messages' key)")
    structured = result.get("structured_response")
    if structured is not None:
        if hasattr(structured, "model_dump_json"):
            return str(structured.model_dump_json())
        if dataclasses.is_dataclass(structured) and not isinstance(structured, type):
            return json.dumps(dataclasses.asdict(structured), default=str)
        return json.dumps(structured, default=str)
    messages = result["messages"]
    ending = itertools.takewhile(lambda message: isinstance(message, ToolMessage), reversed(messages))
    on_tools = "\n\n".join(reversed([text for message in ending if (text := (message.text or "").strip())]))
    return on_tools or next(filter(None, map(_ai_text, reversed(messages))), "")


TRUNCATED_RETRY_KEY = "truncated_retry"
"""The ``response_metadata`` key of a reply that replaced one cut at the token limit (see
:mod:`subagents._truncation`): what the retry asked for (``max_tokens``, ``brief``), and its ``error`` if it failed."""


def cut_short(result: Mapping[str, Any]) -> bool:
    """Whether the run ended on a reply cut at the output token limit: ``finish_reason="length"`` (OpenAI)
    or ``stop_reason="max_tokens"`` (Anthropic) in its ``response_metadata``."""
    messages = result.get("messages") if isinstance(result, Mapping) else None
    last = messages[-1] if messages else None
    if not isinstance(last, AIMessage):
        return False
    meta = last.response_metadata or {}
    return meta.get("finish_reason") == "length" or meta.get("stop_reason") == "max_tokens"


def _ai_text(message: Any) -> str:
    if isinstance(message, AIMessage):
        return (message.text or "").strip()
    if isinstance(message, Mapping) and (message.get("role") in ("assistant", "ai") or message.get("type") == "ai"):
        content = message.get("content")
        if isinstance(content, str):
            return content.strip()
        if isinstance(content, list):
            parts = [p.get("text", "") if isinstance(p, Mapping) else str(p) for p in content]
            return "".join(p for p in parts if isinstance(p, str)).strip()
    return ""


CONTINUATION_PROMPT = ("Your final answer was very short, and the caller sees only your final message. "
                       "Reply now with a complete report of what you found and did, with every detail "
                       "the task asked for.")


@dataclasses.dataclass(frozen=True)
class ChildAnswer:
    """What the runner reads from a child's result, read once. ``follow_up``: the child's input for one request for
    a complete report, when the answer is shorter than ``threshold`` characters (0: never; a structured one never);
    ``truncated_retries``: how many of the run's replies were retried after being cut at the token limit."""
    answer: str
    follow_up: dict[str, Any] | None
    cut_short: bool
    truncated_retries: int

    @classmethod
    def of(cls, result: Mapping[str, Any], threshold: int) -> ChildAnswer:
        answer = final_answer(result)
        short = 0 < threshold and len(answer) < threshold and result.get("structured_response") is None
        follow_up = {"messages": [*result["messages"], HumanMessage(content=CONTINUATION_PROMPT)]} if short else None
        return cls(answer, follow_up, cut_short(result), sum(
            1 for m in result["messages"] if isinstance(m, AIMessage) and TRUNCATED_RETRY_KEY in m.response_metadata))


def merge_continuation(first: str, second: str | None, failure: str | None) -> str:
    """The answer after a continuation request: the longer one; a failed request keeps the first."""
    if failure is not None:
        return f"{first}\n\n[note: the request for a fuller report failed: {failure}]"
    return second if second is not None and len(second) > len(first) else first


LIMIT_STOP_MARK = "stopped_by_limit"  # the response_metadata key of a limit's message: the limit's name

_LIMIT_STOPS: collections.OrderedDict[str, None] = collections.OrderedDict()
"""Ids of the messages :func:`limit_stop` made lately: the mark counts only on one of them, since an
integration echoing its server's fields (or crafted input) could forge the mark, never this random id.
The Stop hook reads the message in the run that wrote it, so the latest few are enough."""
_LIMIT_STOPS_KEPT = 4096
_LIMIT_STOPS_LOCK = threading.Lock()


def limit_stop(text: str, limit: str, name: str | None = None) -> AIMessage:
    """The final AI message ``limit`` (its argument's name) ends a run with, signed ``name`` as the agent's are."""
    message_id = f"limit-stop-{uuid.uuid4().hex}"
    with _LIMIT_STOPS_LOCK:
        _LIMIT_STOPS[message_id] = None
        while len(_LIMIT_STOPS) > _LIMIT_STOPS_KEPT:
            _LIMIT_STOPS.popitem(last=False)
    return AIMessage(content=text, name=name, id=message_id, response_metadata={LIMIT_STOP_MARK: limit})


def stopped_by_limit(message: Any) -> str | None:
    """The limit that wrote ``message``, or ``None`` for a model's own message (or anything else)."""
    if not isinstance(message, AIMessage) or message.id is None or message.id not in _LIMIT_STOPS:
        return None
    limit = (message.response_metadata or {}).get(LIMIT_STOP_MARK)
    return limit if isinstance(limit, str) else None


_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800\u303f\ufffc\U0001d159")
"""Letters and symbols that show nothing: the Hangul fillers, the blank Braille pattern, the ideographic half
fill space, the object replacement character and the musical null notehead."""


def shows_something(text: str) -> bool:
    """Whether ``text`` has a character that shows something: a letter, number, punctuation or symbol
    (Unicode's L, N, P, S) but :data:`_BLANK_LETTERS`; marks, format, control, space, private-use and
    unassigned characters show nothing. The rule for what a child may be started or steered with."""
    return any(unicodedata.category(char)[0] in "LNPS" and char not in _BLANK_LETTERS for char in text)
