"""Short-answer continuation: one request for a complete report.

A child whose final answer is shorter than the threshold (default 200
characters; 0 turns this off) is asked once, in the same conversation, for
a complete report; the longer of the two answers is returned. A failure
during that request returns the first answer with a note, never an error.
Structured responses are never continued.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import HumanMessage

DEFAULT_SHORT_ANSWER_THRESHOLD = 200

CONTINUATION_PROMPT = (
    "Your final answer was very short, and the caller sees only your final message. "
    "Reply now with a complete report of what you found and did, with every detail "
    "the task asked for."
)


def continuation_input(result: Mapping[str, Any], answer: str, threshold: int) -> dict[str, Any] | None:
    """The child's input for the continuation request, or ``None`` when none is due."""
    if threshold <= 0 or len(answer) >= threshold or result.get("structured_response") is not None:
        return None
    return {"messages": [*result["messages"], HumanMessage(content=CONTINUATION_PROMPT)]}


def merge_continuation(first: str, second: str | None, failure: str | None) -> str:
    """The answer to return after a continuation request."""
    if failure is not None:
        return f"{first}\n\n[note: the request for a fuller report failed: {failure}]"
    if second is not None and len(second) > len(first):
        return second
    return first
