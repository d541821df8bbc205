"""The terminal view of a run: this turn's tasks as they start, run, wait and end.

:class:`TaskTree` is fed the parent's stream -- ``subagent_task`` events
from the ``custom`` mode, ledger and message updates from the ``updates``
mode -- and is itself the renderable a ``rich.live.Live`` redraws, so every
refresh recomputes the timers. Rows come from :mod:`deep_agent._thread_tasks`
(delegations, refused calls, background tasks), so the tree, ``deep-agent
tasks`` and the summary agree. Tasks of earlier turns are only counted.

Example::

    tree = TaskTree("deep agent", colors={"researcher": "cyan"}, earlier={"3fa2..."})
    with Live(tree, refresh_per_second=8):
        async for namespace, mode, chunk in agent.astream(..., stream_mode=["custom", "updates"], subgraphs=True):
            tree.feed(namespace, mode, chunk)
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

from rich.color import Color, ColorParseError
from rich.console import Group
from rich.text import Text
from rich.tree import Tree

from deep_agent._terminal_text import printable
from deep_agent._thread_tasks import (
    ASYNC_LEDGER_KEY,
    LEDGER_KEY,
    TaskRow,
    background_row,
    invalid_call_rows,
    sync_row,
)
from subagents import token_count

_STYLE = {"running": "yellow", "completed": "green", "error": "red", "waiting_for_approval": "magenta",
          "cancelled": "dim", "pending": "dim", "lost": "red"}
_ICON = {"running": "…", "completed": "✓", "error": "✗", "waiting_for_approval": "?", "cancelled": "-",
         "pending": "·", "lost": "!"}


class TaskTree:
    """What this turn has done so far, and its rendering (recomputed on every refresh).

    Args:
        title: the root's label.
        colors: agent type -> the ``color`` of its agent file.
        earlier: the ids of the thread's tasks from earlier turns: counted, not listed.
    """

    def __init__(self, title: str, *, colors: Mapping[str, str] | None = None,
                 earlier: Iterable[str] = ()) -> None:
        self.title = title
        self.colors = {k: v for k, v in (colors or {}).items() if _valid_color(v)}
        self.earlier = frozenset(earlier)
        self.started = time.monotonic()
        self.finished: float | None = None
        self.outcome = "done"
        self.sync: dict[str, dict[str, Any]] = {}
        self.background: dict[str, dict[str, Any]] = {}
        self.messages: list[Any] = []
        self.live: dict[str, dict[str, Any]] = {}
        self.root_usage = {"model_calls": 0, "input_tokens": 0, "output_tokens": 0}
        self.root_model: str | None = None

    # -- feeding ------------------------------------------------------------

    def feed(self, namespace: tuple[str, ...], mode: str, chunk: Any) -> None:
        if mode == "custom" and isinstance(chunk, dict) and chunk.get("type") == "subagent_task":
            self.event(chunk)
        elif mode == "updates" and not namespace and isinstance(chunk, Mapping):
            for update in chunk.values():
                for part in update if isinstance(update, list) else [update]:
                    if isinstance(part, Mapping):
                        self.update(part)

    def event(self, event: Mapping[str, Any]) -> None:
        """A lifecycle event of a ``task`` delegation (one without a task id is not ours: a child's tool can
        write any custom event, so it is ignored)."""
        task_id = event.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            return
        row = self.live.setdefault(task_id, {"started_at": time.time()})
        row.update(event)

    def update(self, update: Mapping[str, Any]) -> None:
        """A state update of the root: ledgers and messages."""
        for task_id, record in (update.get(LEDGER_KEY) or {}).items():
            self.sync[task_id] = dict(record)
        for task_id, fields in (update.get(ASYNC_LEDGER_KEY) or {}).items():
            self.background[task_id] = {**self.background.get(task_id, {}), **fields, "id": task_id}
        for message in update.get("messages") or ():
            self.messages.append(message)
            usage = getattr(message, "usage_metadata", None)
            if getattr(message, "type", "") == "ai" and isinstance(usage, Mapping) and usage:
                self.root_usage["model_calls"] += 1  # the server's counts, clamped: never trusted
                self.root_usage["input_tokens"] += token_count(usage.get("input_tokens"))
                self.root_usage["output_tokens"] += token_count(usage.get("output_tokens"))
                self.root_model = (message.response_metadata or {}).get("model_name") or self.root_model

    def stop_clock(self, outcome: str = "done") -> None:
        if self.finished is None:
            self.finished = time.monotonic()
            self.outcome = outcome

    # -- reading --------------------------------------------------------------

    def rows(self) -> list[TaskRow]:
        rows: dict[str, TaskRow] = {}
        for task_id, event in self.live.items():
            rows[task_id] = _event_row(task_id, event)
        for task_id, record in self.sync.items():
            rows[task_id] = sync_row(record)
        for task_id, record in self.background.items():
            rows[task_id] = background_row({**record, **_live_background(task_id)})
        known = {r.tool_call_id for r in rows.values() if r.tool_call_id}
        for row in invalid_call_rows(self.messages, known):
            rows.setdefault(row.id, row)
        return [row for row in rows.values() if row.id not in self.earlier]

    def __rich__(self) -> Group:
        now = time.time()
        elapsed = (self.finished or time.monotonic()) - self.started
        state = self.outcome if self.finished else "running"
        tree = Tree(Text.assemble((self.title, "bold"), (f"  {state} {elapsed:.1f}s", "dim")))
        if self.earlier:
            tree.add(Text(f"{len(self.earlier)} task(s) of earlier turns (deep-agent tasks)", style="dim"))
        rows = self.rows()
        for row in rows:
            tree.add(self._line(row, now))
        if not rows:
            tree.add(Text("no tasks in this turn" if self.finished else "no tasks yet", style="dim"))
        return Group(tree)

    def _line(self, row: TaskRow, now: float) -> Text:
        status = row.status
        line = Text()
        line.append(f"{_ICON.get(status, '·')} ", style=_STYLE.get(status, ""))
        # Ids, names and errors can hold a child's text: escaped, so no escape sequence reaches the terminal.
        line.append(printable(row.agent_type), style=self.colors.get(row.agent_type, _STYLE.get(status, "")))
        kind = {"background": f" [background, {row.runner or 'local'}, attempt {row.attempt or 1}]",
                "refused": " [refused]"}.get(row.kind, "")
        line.append(kind, style="cyan" if row.kind == "background" else "red")
        line.append(f"  {printable(row.id[:8])}  {printable(status)}  {row.seconds(now):.1f}s",
                    style="dim" if status in ("running", "pending") else "")
        if row.tokens:
            line.append(f"  {row.tokens} tokens")
        if row.error:
            line.append(f"  {printable(' '.join(str(row.error).split()))[:100]}", style="red")
        return line


def _event_row(task_id: str, event: Mapping[str, Any]) -> TaskRow:
    # Any tool can write a "subagent_task" event: its times and ids are checked like its counts.
    duration = _seconds(event.get("duration_ms"))
    tool_call_id = event.get("tool_call_id")
    return TaskRow(
        id=task_id, kind="refused" if event.get("refused") else "task",
        agent_type=str(event.get("agent_type") or "?"),
        status=str(event.get("status") or "running"),
        tool_call_id=tool_call_id if isinstance(tool_call_id, str) else None,
        started_at=_seconds(event.get("started_at")), duration_s=None if duration is None else duration / 1000,
        model_calls=token_count(event.get("model_calls")), input_tokens=token_count(event.get("input_tokens")),
        output_tokens=token_count(event.get("output_tokens")), error=event.get("error"),
    )


def _seconds(value: Any) -> float | None:
    """A time or duration from an event: a finite number, else unknown."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value) if math.isfinite(value) else None
    except OverflowError:  # an int past any float
        return None


def _live_background(task_id: str) -> dict[str, Any]:
    """What this process knows now about a local background task (the ledger lags a turn)."""
    try:
        from subagents.background import known_task

        task = known_task(task_id)
        return {**dict(task.fields), **task.usage()} if task is not None else {}
    except Exception:  # noqa: BLE001 - a view never fails the run
        return {}


def _valid_color(value: Any) -> bool:
    try:
        Color.parse(str(value))
        return True
    except ColorParseError:
        return False
