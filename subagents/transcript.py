"""Every delegation's message history, readable after the run.

Where a transcript lives is written in the task record (``transcript``):

* ``jsonl:<path>`` -- with ``sessions_dir`` set, a JSONL file in the
  my-pi-agent layout, ``<sessions_dir>/<parent_thread_id>/subagents/agent-<task_id>.jsonl``:
  a header line ``{"id", "created_at", "cwd", "metadata": {"agent_type",
  "parent_session_id", "tool_call_id"}}``, then one message per line,
  appended and flushed while the child runs, so a crash leaves a readable
  partial file;
* ``store:<namespace>`` -- with a ``BaseStore`` sink, one item per task;
* ``checkpoint:<namespace>`` -- otherwise, the child's own checkpoints in
  the parent's checkpointer (the child runs as a subgraph there);
* ``memory:<task_id>`` -- with no checkpointer either, a bounded in-process
  table of recent transcripts.

Example::

    from subagents import get_transcript

    messages = get_transcript(agent, {"configurable": {"thread_id": "t1"}}, task_id)
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, SystemMessage, message_to_dict, messages_from_dict

from subagents.isolation import LEDGER_KEY

STORE_NAMESPACE = "subagent_transcripts"
_MEMORY_LIMIT = 512
_MEMORY_MAX_BYTES = 32 * 1024 * 1024
"""The in-memory fallback keeps at most this much message text (oldest transcripts dropped first)."""
_memory: collections.OrderedDict[str, list[BaseMessage]] = collections.OrderedDict()
_memory_sizes: dict[str, int] = {}
_memory_bytes = 0
_memory_lock = threading.Lock()


def jsonl_path(sessions_dir: str | os.PathLike[str], thread_id: str | None, task_id: str) -> Path:
    """Where a task's JSONL transcript is written."""
    return Path(sessions_dir) / (thread_id or "no-thread") / "subagents" / f"agent-{task_id}.jsonl"


class TranscriptRecorder(BaseCallbackHandler):
    """Collects the child's messages from its model calls as they happen.

    Only the child's own agent turns are recorded: a model call counts when
    it continues the history recorded so far (a summariser's side call, with
    its own prompt, does not).
    """

    run_inline = True
    ignore_chain = True
    ignore_retriever = True
    ignore_agent = True

    def __init__(self, header: Mapping[str, Any], path: Path | None = None) -> None:
        self.header = dict(header)
        self.messages: list[BaseMessage] = []
        self._ids: set[str] = set()
        self._turns: set[Any] = set()
        self._lock = threading.Lock()
        self._file = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8")
            self._write(self.header)

    def _write(self, obj: Mapping[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(obj, default=str, ensure_ascii=False) + "\n")
            self._file.flush()

    def _add(self, messages: list[BaseMessage]) -> None:
        with self._lock:
            for message in messages:
                if isinstance(message, SystemMessage) or message.id in self._ids:
                    continue
                if message.id is not None:
                    self._ids.add(message.id)
                self.messages.append(message)
                self._write(message_to_dict(message))

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

    def close(self, final_messages: list[BaseMessage] | None = None) -> list[BaseMessage]:
        """Add what the child's final state holds beyond its last model call; close the file."""
        if final_messages:
            self._add(list(final_messages))
        if self._file is not None:
            self._file.close()
            self._file = None
        return self.messages


def remember(task_id: str, messages: list[BaseMessage]) -> None:
    """Keep a transcript in process memory (the fallback with no checkpointer)."""
    global _memory_bytes
    size = sum(_message_bytes(m) for m in messages)
    with _memory_lock:
        _memory.pop(task_id, None)
        _memory_bytes -= _memory_sizes.pop(task_id, 0)
        _memory[task_id] = messages
        _memory_sizes[task_id] = size
        _memory_bytes += size
        while len(_memory) > 1 and (len(_memory) > _MEMORY_LIMIT or _memory_bytes > _MEMORY_MAX_BYTES):
            dropped, _ = _memory.popitem(last=False)
            _memory_bytes -= _memory_sizes.pop(dropped, 0)


def _message_bytes(message: BaseMessage) -> int:
    content = message.content
    text = content if isinstance(content, str) else str(content)
    return 200 + len(text)


def store_transcript(store: Any, thread_id: str | None, task_id: str, header: Mapping[str, Any],
                     messages: list[BaseMessage]) -> str:
    namespace = (STORE_NAMESPACE, thread_id or "no-thread")
    store.put(namespace, task_id, {"header": dict(header),
                                   "messages": [message_to_dict(m) for m in messages]})
    return "store:" + "/".join(namespace)


def read_jsonl(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[BaseMessage]]:
    """The header and messages of a JSONL transcript; a torn last line is skipped."""
    header: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue  # a crash mid-write leaves at most one torn line
            if number == 0:
                header = obj
            else:
                rows.append(obj)
    return header, messages_from_dict(rows)


def get_transcript(graph: Any, config: Mapping[str, Any], task_id: str) -> list[BaseMessage]:
    """The full message history of one task of a thread, wherever it was kept.

    ``graph`` is the parent graph (its state is read with ``config``), or,
    for a parent run without a checkpointer, the state the run returned.
    """
    thread_id = (config.get("configurable") or {}).get("thread_id")
    values = graph if isinstance(graph, Mapping) else graph.get_state(config).values
    record = (values.get(LEDGER_KEY) or {}).get(task_id)
    if record is None:
        raise KeyError(f"no task {task_id!r} in the ledger of thread {thread_id!r}")
    return read_transcript(record, thread_id=thread_id,
                           checkpointer=getattr(graph, "checkpointer", None),
                           store=getattr(graph, "store", None))


def read_transcript(record: Mapping[str, Any], *, thread_id: str | None, checkpointer: Any = None,
                    store: Any = None) -> list[BaseMessage]:
    """Read the transcript a task record points at."""
    task_id = record.get("id")
    kind, _, ref = (record.get("transcript") or "").partition(":")
    if kind == "jsonl":
        return read_jsonl(ref)[1]
    if kind == "store":
        item = store.get(tuple(ref.split("/")), task_id) if store is not None else None
        if item is None:
            raise LookupError(f"task {task_id!r}: no transcript in the store at {ref!r}")
        return messages_from_dict(item.value["messages"])
    if kind == "checkpoint":
        saved = None
        if checkpointer is not None:
            saved = checkpointer.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ref}})
        if saved is None:
            raise LookupError(f"task {task_id!r}: no child checkpoint at namespace {ref!r}")
        return list(saved.checkpoint["channel_values"].get("messages", []))
    if kind == "memory":
        with _memory_lock:
            if ref in _memory:
                return list(_memory[ref])
        raise LookupError(f"task {task_id!r}: its in-memory transcript is gone (process restarted?)")
    raise LookupError(f"task {task_id!r} has no transcript location")


def header_for(task_id: str, agent_type: str, thread_id: str | None, tool_call_id: str | None) -> dict[str, Any]:
    return {
        "id": task_id,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(),
        "cwd": os.getcwd(),
        "metadata": {
            "agent_type": agent_type,
            "parent_session_id": thread_id,
            "tool_call_id": tool_call_id,
        },
    }
