"""Counting what a child spends, and stopping it between steps.

A :class:`TaskMeter` rides along in the child's callbacks, so it sees every
model call of any child (a built spec or a caller's compiled graph) without
touching the graph. It counts model calls and tokens and, because LangChain
re-raises errors from handlers marked ``raise_error``, it can stop the child
at its next model or tool call once the task's deadline has passed or the
task was cancelled: this is what ends an abandoned child on the ``invoke``
path, where a running thread cannot be interrupted from outside.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult


class TaskStopped(Exception):
    """Raised inside a child to stop it; the message says why."""


class TaskMeter(BaseCallbackHandler):
    """Per-task model-call and token counter with a deadline and a stop switch."""

    raise_error = True
    run_inline = True

    def __init__(self, deadline: float | None = None) -> None:
        self.model_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.deadline = deadline
        self._stop_reason: str | None = None
        self._lock = threading.Lock()

    def stop(self, reason: str) -> None:
        """Ask the child to stop at its next model or tool call."""
        self._stop_reason = reason

    def _check(self) -> None:
        if self._stop_reason is not None:
            raise TaskStopped(self._stop_reason)
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise TaskStopped("timed out")

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self._check()
        with self._lock:
            self.model_calls += 1

    def on_llm_start(self, serialized: Any, prompts: Any, **kwargs: Any) -> None:
        self._check()
        with self._lock:
            self.model_calls += 1

    def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
        self._check()

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        usage = _usage_of(response)
        if usage:
            with self._lock:
                self.input_tokens += int(usage.get("input_tokens") or 0)
                self.output_tokens += int(usage.get("output_tokens") or 0)


def _usage_of(response: LLMResult) -> dict[str, Any] | None:
    for generations in response.generations:
        for gen in generations:
            message = getattr(gen, "message", None)
            usage = getattr(message, "usage_metadata", None)
            if usage:
                return dict(usage)
    token_usage = (response.llm_output or {}).get("token_usage") or {}
    if token_usage:
        return {
            "input_tokens": token_usage.get("prompt_tokens", 0),
            "output_tokens": token_usage.get("completion_tokens", 0),
        }
    return None
