"""The terminal view of a run: :class:`TaskTree`, fed the parent's stream, is what a ``rich.live.Live`` redraws
(its rows are :mod:`deep_agent.cli._store`'s, so the tree and ``deep-agent tasks`` agree)."""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import math
import os
import select
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from rich.color import Color, ColorParseError
from rich.console import Console, Group
from rich.text import Text
from rich.tree import Tree

from deep_agent.cli._errors import with_hint
from deep_agent.cli._store import (
    DELEGATION_TOOLS,
    TaskRow,
    background_row,
    cut_short_by,
    invalid_call_rows,
    seconds_text,
    sync_row,
)
from deep_agent.cli._terminal import printable
from middleware._task_tool import ASYNC_LEDGER_KEY, LEDGER_KEY
from subagents._metering import token_count

# From the first live view on, fd 2 is a pipe whose lines a thread prints: above the tree while a view is up
# (``Live`` redraws in place, so a line written straight to the terminal would land inside the tree), else
# to the terminal. Every line is escaped, view or not: a hook or MCP server (and what it runs) must never
# move the cursor over an approval prompt, so fd 2 stays the pipe for the process's life and every process
# started later, at a prompt too, inherits it. The thread reads on for as long as any holds the pipe.

STDERR = 2
MAX_LINE = 4096  # longer lines are shown in pieces
QUIET_S = 0.2  # a line without its newline is shown once the pipe is quiet this long
FLUSH_WAIT_S = 2.0
_FLUSH = b"\x00\x1fstderr-relay-flush\x1f\x00"  # one write, never split: all before it has been read

ERROR_CHARS = 100  # of a child's error the tree shows; ``deep-agent tasks --full`` prints the rest


def clipped(text: str, limit: int) -> str:
    """``text`` cut at a word boundary within ``limit``, saying where the rest is."""
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return f"{cut}... (deep-agent tasks --full)"


class _Relay:
    """The process's one pipe in place of fd 2, and the thread that empties it."""

    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe()
        self.terminal = os.dup(STDERR)  # where stderr pointed before: the terminal
        self.console: Console | None = None  # set while a view is up
        self.lock = threading.Lock()
        self.flushed = threading.Event()
        self.flush_lock = threading.Lock()
        threading.Thread(target=self._drain, name="stderr-relay", daemon=True).start()
        atexit.register(self.flush)  # lines a server wrote after the last view, still in the pipe

    def _drain(self) -> None:
        pending = b""
        while True:
            ready, _, _ = select.select([self.read_end], [], [], QUIET_S if pending else None)
            if not ready:  # quiet: a line without its newline is shown as it is
                self._show([pending])
                pending = b""
                continue
            chunk = os.read(self.read_end, 65536)
            if not chunk:
                return
            *lines, pending = (pending + chunk).split(b"\n")
            while len(pending) > MAX_LINE:
                lines.append(pending[:MAX_LINE])
                pending = pending[MAX_LINE:]
            shown: list[bytes] = []
            for line in lines:
                if line.endswith(_FLUSH):  # everything written before this mark has now been read
                    shown.extend([line[:-len(_FLUSH)]] if line != _FLUSH else [])
                    self._show(shown)
                    shown = []
                    self.flushed.set()
                else:
                    shown.append(line)
            self._show(shown)

    def _show(self, lines: list[bytes]) -> None:
        if not lines:
            return
        text = "\n".join(printable(line.decode("utf-8", "replace").rstrip("\r")) for line in lines)
        with self.lock:
            console = self.console
        with contextlib.suppress(Exception):  # lines lost are better than a relay that stops draining
            if console is not None:
                console.print(Text(text, style="dim"), soft_wrap=True)
            else:
                data = memoryview(f"{text}\n".encode())
                while data:
                    data = data[os.write(self.terminal, data):]

    def flush(self) -> None:
        """Wait (at most FLUSH_WAIT_S) until what was written to the pipe so far has been shown."""
        with self.flush_lock:
            self.flushed.clear()
            with contextlib.suppress(OSError, ValueError):  # a pipe that stays full must not hold the caller
                if select.select([], [self.write_end], [], FLUSH_WAIT_S)[1]:
                    os.write(self.write_end, _FLUSH + b"\n")
                    self.flushed.wait(FLUSH_WAIT_S)


def _flush_stderr() -> None:
    with contextlib.suppress(Exception):  # Python's buffered stderr, before fd 2 changes hands (if usable)
        sys.stderr.flush()


_relay: _Relay | None = None
_relay_lock = threading.Lock()


@contextlib.contextmanager
def relayed_stderr(console: Console) -> Iterator[None]:
    """While entered, lines written to fd 2 are printed through ``console`` (when both are terminals); from the
    first entry on, escaped to the terminal in between."""
    global _relay
    usable = False
    with contextlib.suppress(OSError, ValueError):
        usable = console.is_terminal and os.isatty(STDERR)
    if not usable:
        yield
        return
    with _relay_lock:
        if _relay is None:
            _flush_stderr()
            _relay = _Relay()
            if faulthandler.is_enabled():  # a crash report written into the pipe would die with the process
                faulthandler.enable(file=_relay.terminal, all_threads=True)
            os.dup2(_relay.write_end, STDERR)
        relay = _relay
    with relay.lock:
        relay.console = console
    try:
        yield
    finally:
        _flush_stderr()
        relay.flush()  # printed through the console while it is still the view's
        with relay.lock:
            relay.console = None


UNFINISHED = frozenset({"pending", "running", "waiting_for_approval"})

_LOOK = {"running": ("yellow", "…"), "completed": ("green", "✓"), "error": ("red", "✗"), "lost": ("red", "!"),
         "waiting_for_approval": ("magenta", "?"), "cancelled": ("dim", "-"), "pending": ("dim", "·")}


class TaskTree:
    """What this turn has done so far, and its rendering (recomputed on every refresh); ``colors``: agent type ->
    its agent file's ``color``; ``earlier``: the ids of the thread's tasks from earlier turns (counted, not listed)."""

    def __init__(self, title: str, *, colors: Mapping[str, str] | None = None,
                 earlier: Iterable[str] = ()) -> None:
        self.title = title
        self.colors = {k: v for k, v in (colors or {}).items() if _valid_color(v)}
        self.earlier = frozenset(earlier)
        self.started = time.monotonic()
        self.started_at = time.time()
        self.finished: float | None = None
        self.waiting_s = 0.0  # the turn's time at approval prompts
        self.outcome = "done"
        self.sync: dict[str, dict[str, Any]] = {}
        self.background: dict[str, dict[str, Any]] = {}
        self.messages: list[Any] = []
        self.live: dict[str, dict[str, Any]] = {}
        self.root_usage = {"model_calls": 0, "input_tokens": 0, "output_tokens": 0}
        self._counted: set[str] = set()
        self.root_model: str | None = None
        self._root_since = self.started

    def feed(self, namespace: tuple[str, ...], mode: str, chunk: Any) -> None:
        if mode == "custom" and isinstance(chunk, dict) and chunk.get("type") in ("subagent_task", "subagent_progress"):
            (self.event if chunk["type"] == "subagent_task" else self.progress)(chunk)
        elif mode == "updates" and not namespace and isinstance(chunk, Mapping):
            for update in chunk.values():
                for part in update if isinstance(update, list) else [update]:
                    if isinstance(part, Mapping):
                        self.update(part)

    def event(self, event: Mapping[str, Any]) -> None:
        """A lifecycle event of a ``task`` delegation (a child's tool can write any custom event: checked)."""
        task_id = event.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            return
        now = time.time()
        row = self.live.setdefault(task_id, {"started_at": now})
        # A pause for approval is waiting, not work: timed apart, from the events that start and end it.
        if event.get("status") == "waiting_for_approval":
            row.setdefault("paused_since", now)
        else:
            _end_pause(row, now)
        row.update({k: v for k, v in event.items() if k not in _OWN_KEYS})  # the tree's own clock stays its own

    def progress(self, event: Mapping[str, Any]) -> None:
        """A running child's turn and current tool (``subagent_progress``): shown on its row, if it has one."""
        row = self.live.get(event.get("task_id"))  # type: ignore[arg-type]
        if row is not None:
            row.update({key: event.get(key) for key in ("turn", "tool", "tool_input", "model_calls",
                                                          "input_tokens", "output_tokens")})

    def update(self, update: Mapping[str, Any]) -> None:
        self.sync.update({task_id: dict(record) for task_id, record in (update.get(LEDGER_KEY) or {}).items()})
        for task_id, fields in (update.get(ASYNC_LEDGER_KEY) or {}).items():
            self.background[task_id] = {**self.background.get(task_id, {}), **fields, "id": task_id}
        for message in update.get("messages") or ():
            self._root_since = time.monotonic()  # the root's next step (a model call, its tools) starts now
            self.messages.append(message)
            usage = getattr(message, "usage_metadata", None)
            if (message_id := getattr(message, "id", None)) is not None:
                # An approval's resume writes the same AI message again (edited or as it was): one call, once.
                if message_id in self._counted:
                    continue
                self._counted.add(message_id)
            if getattr(message, "type", "") == "ai" and isinstance(usage, Mapping) and usage:
                self.root_usage["model_calls"] += 1  # the server's counts, clamped: never trusted
                self.root_usage["input_tokens"] += token_count(usage.get("input_tokens"))
                self.root_usage["output_tokens"] += token_count(usage.get("output_tokens"))
                self.root_model = (message.response_metadata or {}).get("model_name") or self.root_model

    def stop_clock(self, outcome: str = "done") -> None:
        if self.finished is None:
            self.finished = time.monotonic()
            self.outcome = outcome

    def cut_short(self, outcome: str = "failed") -> None:
        """The turn ended before its tasks did (Ctrl-C, an error): the clock stops, open tasks show ``cancelled``."""
        self.stop_clock(outcome)
        now = time.time()
        for task_id, row in self.live.items():
            status = row.get("status", "running")
            if (task_id in self.sync or row.get("refused") or status not in UNFINISHED | {"cancelled"}
                    or (status == "cancelled" and row.get("duration_ms") is not None)):
                continue
            _end_pause(row, now)  # its clocks stop here too
            started = _seconds(row.get("started_at"))
            if started is not None:
                row["duration_ms"] = max(0.0, now - started - row.get("waited_s", 0.0)) * 1000
            row["status"] = "cancelled"

    def rows(self) -> list[TaskRow]:
        rows = {task_id: _event_row(task_id, event) for task_id, event in self.live.items()}
        rows.update({task_id: sync_row(record) for task_id, record in self.sync.items()})
        for task_id, record in self.background.items():
            rows[task_id] = background_row({**record, **live_background(task_id)})
        known = {r.tool_call_id for r in rows.values() if r.tool_call_id}
        for row in invalid_call_rows(self.messages, known):
            rows.setdefault(row.id, row)
        return [row for row in rows.values() if row.id not in self.earlier]

    def __rich__(self) -> Group:
        now = time.time()
        elapsed = (self.finished or time.monotonic()) - self.started
        state = self.outcome if self.finished else "running"
        rows = self.rows()
        waiting = turn_waiting(self.waiting_s, rows, now)
        shown = seconds_text(max(0.0, elapsed - waiting), waiting)
        tree = Tree(Text.assemble((self.title, "bold"), (f"  {state} {shown}", "dim")))
        if self.earlier:
            tree.add(Text(f"{len(self.earlier)} task(s) of earlier turns (deep-agent tasks)", style="dim"))
        for row in rows:
            tree.add(self._line(row, now))
        if self.finished is None:
            tree.add(Text(self.root_activity(), style="dim"))
        elif not rows:
            tree.add(Text("no tasks in this turn", style="dim"))
        return Group(tree)

    def root_activity(self) -> str:
        """What the root is doing now: ``thinking 4.2s`` (a model call) or its own tool calls, with the time."""
        since = f"{time.monotonic() - self._root_since:.1f}s"
        last = self.messages[-1] if self.messages else None
        calls = [c for c in getattr(last, "tool_calls", None) or () if c.get("name") not in DELEGATION_TOOLS]
        if getattr(last, "type", "") != "ai":
            return f"thinking {since}"
        if not getattr(last, "tool_calls", None):  # it has answered: what keeps the turn open is its background
            return f"answered; waiting for background tasks {since}"
        if not calls:
            return f"waiting for its tasks {since}"
        return printable(", ".join(tool_line(c.get("name"), c.get("args")) for c in calls[:3])) + f" {since}"

    def _line(self, row: TaskRow, now: float) -> Text:
        status = row.status
        cut = row.shown_status != status  # completed with a wrap-up's partial answer
        style, icon = ("yellow", "~") if cut else _LOOK.get(status, ("", "·"))
        # Ids, names and errors can hold a child's text: escaped, so no escape sequence reaches the terminal.
        line = Text.assemble((f"{icon} ", style), (printable(row.agent_type), self.colors.get(row.agent_type, style)))
        kind = {"background": f" [background, {row.runner or 'local'}, attempt {row.attempt or 1}]",
                "refused": " [refused]"}.get(row.kind, "")
        line.append(kind, style="cyan" if row.kind == "background" else "red")
        line.append(f"  {printable(row.id[:8])}  {printable(row.shown_status)}  {row.timing(now)}",
                    style="dim" if status in ("running", "pending") else "")
        if row.tokens:
            line.append(f"  {row.tokens} tokens")
        live = (self.live.get(row.id) if status == "running" and row.kind == "task" else None) or {}
        turn = live.get("turn")
        if isinstance(turn, int) and not isinstance(turn, bool) and turn > 0:
            doing = tool_line(live.get("tool"), {"": live.get("tool_input")}) if live.get("tool") else "thinking"
            line.append(f"  turn {turn} · {printable(doing)}", style="cyan")
        if row.error:
            line.append(f"  {clipped(printable(' '.join(str(row.error).split())), ERROR_CHARS)}", style="red")
        return line


def turn_waiting(prompts_s: float, rows: Iterable[TaskRow], now: float | None = None) -> float:
    """The turn's time waiting for approval: its prompts', never less than any ``task``'s wait (two clocks: a
    child's wait never reads longer than its parent's); background tasks' pauses do not stop the run."""
    return max([prompts_s, *(row.waiting(now) for row in rows if row.kind == "task")])


_OWN_KEYS = frozenset({"paused_since", "waited_s"})  # the tree's own clock: no event sets them

ACTIVITY_CHARS = 60


def tool_line(name: Any, args: Any) -> str:
    """``Read src/app.py``: a tool call as a progress line names it (its first text argument, cut short)."""
    text = str(name or "?")
    first = next((v for v in (args.values() if isinstance(args, Mapping) else ()) if isinstance(v, str) and v), None)
    if first:
        first = " ".join(first.split())
        text += " " + (first if len(first) <= ACTIVITY_CHARS else first[:ACTIVITY_CHARS - 3] + "...")
    return text


def _event_row(task_id: str, event: Mapping[str, Any]) -> TaskRow:
    # Any tool can write a "subagent_task" event: its times and ids are checked like its counts.
    duration = _seconds(event.get("duration_ms"))
    call_id = event.get("tool_call_id")
    return TaskRow(
        id=task_id, kind="refused" if event.get("refused") else "task", agent_type=str(event.get("agent_type") or "?"),
        status=str(event.get("status") or "running"), tool_call_id=call_id if isinstance(call_id, str) else None,
        started_at=_seconds(event.get("started_at")), duration_s=None if duration is None else duration / 1000,
        waiting_s=_seconds(event.get("waited_s")) or 0.0, paused_since=_seconds(event.get("paused_since")),
        model_calls=token_count(event.get("model_calls")), input_tokens=token_count(event.get("input_tokens")),
        output_tokens=token_count(event.get("output_tokens")), error=with_hint(event.get("error")),
        cut_short=cut_short_by(event))


def _end_pause(row: dict[str, Any], now: float) -> None:
    if row.get("paused_since") is not None:
        row["waited_s"] = row.get("waited_s", 0.0) + max(0.0, now - row.pop("paused_since"))


def _seconds(value: Any) -> float | None:
    """A time or duration from an event: a finite number, else unknown."""
    with contextlib.suppress(OverflowError):  # an int past any float
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


def live_background(task_id: str) -> dict[str, Any]:
    """What this process knows now about a local background task (the ledger lags a turn)."""
    from subagents.background import known_task

    with contextlib.suppress(Exception):  # a view never fails the run
        if (task := known_task(task_id)) is not None:
            return {**dict(task.fields), **task.usage()}
    return {}


def _valid_color(value: Any) -> bool:
    with contextlib.suppress(ColorParseError):
        return bool(Color.parse(str(value)))
    return False
