"""Collecting a child's messages from its model calls as they happen.

Only the child's own agent turns are recorded: a model call counts when it
continues the history recorded so far (a summariser's side call, with its
own prompt, does not). Each new message goes to the task's
:class:`~subagents._transcript.TranscriptSink` at once, so a JSONL transcript
grows while the child runs.
"""

from __future__ import annotations

import threading
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, SystemMessage

from subagents._transcript import TranscriptSink


class TranscriptRecorder(BaseCallbackHandler):
    """A callback handler that feeds one sink."""

    run_inline = True
    ignore_chain = True
    ignore_retriever = True
    ignore_agent = True

    def __init__(self, sink: TranscriptSink) -> None:
        self.sink = sink
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
                if not self._closed:
                    self.sink.add(message)

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any, **kwargs: Any) -> None:
        history = [m for m in messages[0] if not isinstance(m, SystemMessage)]
        if self._ids and not any(m.id in self._ids for m in history):
            return
        self._turns.add(run_id)
        self._add(history)

    def on_llm_end(self, response: Any, *, run_id: Any, **kwargs: Any) -> None:
        if run_id not in self._turns:
            return
        self._add([g.message for gens in response.generations for g in gens if hasattr(g, "message")])

    def close(self, final_messages: list[BaseMessage] | None = None, *, cancelled: bool = False) -> str:
        """Add what the final state holds beyond the last model call; end the sink."""
        if final_messages:
            self._add(list(final_messages))
        with self._lock:
            self._closed = True
        return self.sink.end(self.messages, cancelled=cancelled)
