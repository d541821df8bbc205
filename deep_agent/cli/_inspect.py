"""``deep-agent tasks`` and ``deep-agent transcript``: reading earlier runs back (a failed lookup leaves no state)."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from deep_agent.cli._live_view import clipped
from deep_agent.cli._store import (
    TaskRow,
    find_task,
    last_thread,
    open_checkpointer,
    read_thread,
    resolve_state_dir,
    state_file,
    task_rows,
)
from deep_agent.cli._terminal import printable
from subagents import read_transcript
from subagents._errors import UnknownTask


def tasks_command(args: argparse.Namespace) -> int:
    state = resolve_state_dir(args.state_dir, create=False)
    thread = args.thread or last_thread(state)
    if not thread:
        raise UnknownTask("no thread given and none run here yet: deep-agent tasks THREAD")
    with open_checkpointer(state, args.db_url) as saver:
        rows = task_rows(read_thread(saver, thread))
    if args.format == "json":
        print(tasks_json(thread, rows))
        return 0
    console = Console()
    console.print(tasks_view(thread, rows, full=args.full, width=console.width))
    if not rows:
        console.print("no tasks in this thread")
    return 0


def tasks_json(thread: str, rows: Sequence[TaskRow]) -> str:
    """``deep-agent tasks --format json``: one JSON document, every task with its fields, texts whole."""
    # paused_since: a live view's clock, never part of a stored record.
    tasks = [{**{k: v for k, v in dataclasses.asdict(row).items() if k != "paused_since"}, "tokens": row.tokens,
              "duration_s": row.seconds(), "waiting_s": row.waiting()} for row in rows]
    return json.dumps({"thread": thread, "tasks": tasks}, indent=2, default=str)


TABLE_MIN_WIDTH = 100  # narrower (a pipe is 80 columns), ``tasks`` prints a block per task
OUTCOME_CHARS = 70  # of a result or error; ``--full`` shows all of it


def tasks_view(thread: str, rows: Sequence[TaskRow], *, full: bool = False, width: int = 200) -> RenderableType:
    """A thread's tasks: a table, or one block per task where rich would fold the columns inside words."""
    # Thread ids and ledger text (a child's answer) are data: never read as markup, control characters escaped.
    title = Text(f"tasks of thread {printable(thread)}")
    lines = []
    for row in rows:
        kind = row.kind if row.kind != "background" else f"background {row.runner} #{row.attempt or 1}"
        outcome = " ".join(row.outcome.split())
        lines.append((row.id[:8], row.agent_type, kind, row.shown_status, row.timing(), str(row.model_calls),
                      str(row.tokens), outcome if full else clipped(outcome, OUTCOME_CHARS)))
    if width >= TABLE_MIN_WIDTH:
        table = Table(title=title)
        for column in ("task", "agent", "kind", "status", "time", "calls", "tokens"):
            table.add_column(column, no_wrap=column != "time")  # "2.1s + 4.0s waiting" wraps at its spaces
        table.add_column("result or error", min_width=24)
        for cells in lines:
            table.add_row(*(Text(printable(cell)) for cell in cells))
        # Whether it fits without folding a column inside its words (a measure is clamped to the width it is given).
        measuring = Console(width=10_000, file=io.StringIO())
        if Measurement.get(measuring, measuring.options, table).minimum <= width:
            return table
    blocks: list[RenderableType] = [Text(title.plain, style="italic")]
    for task, agent, kind, status, timing, calls, tokens, outcome in lines:
        head = f"{task}  {agent}  {kind}  {status}  {timing}  {calls} calls  {tokens} tokens"
        blocks.append(Text(printable(head), style="bold"))
        if outcome:
            blocks.append(Padding(Text(printable(outcome)), (0, 0, 0, 2)))
    return Group(*blocks)


def state_holding(state: Path, ref: str) -> Path:
    """The state folder a transcript lies in: this one, or the one a shared ``--db`` record names."""
    path = Path(ref)
    if not path.is_absolute() or state.absolute() in path.parents or "sessions" not in path.parts[:-1]:
        return state
    at = max(i for i, part in enumerate(path.parts[:-1]) if part == "sessions")
    return Path(*path.parts[:at])


def transcript_command(args: argparse.Namespace) -> int:
    state = resolve_state_dir(args.state_dir, create=False)
    console = Console()
    with open_checkpointer(state, args.db_url) as saver:
        thread, row = find_task(saver, args.task_id, args.thread)
        about = (f" ({row.agent_type}, {row.kind}, {row.status}) in thread {thread}; "
                 f"transcript: {row.transcript or 'none'}")
        console.print(Text.assemble((f"task {printable(row.id)}", "bold"), printable(about)), highlight=False)
        if row.kind == "refused" or not row.transcript:
            console.print(printable(f"it ran no child ({row.status}): {row.outcome}", lines=True),
                          markup=False, highlight=False)
            return 0
        messages = read_transcript({"id": row.id, "transcript": row.transcript}, thread_id=thread,
                                   checkpointer=saver, open_file=lambda ref: state_file(state_holding(state, ref), ref))
    # A child's messages are model output: shown as its lines, but no escape sequence in them reaches the terminal.
    for message in messages:
        console.print(f"[bold]{message.type}[/bold]: ", end="")
        console.print(printable(message.text or "", lines=True), markup=False, highlight=False)
        for call in getattr(message, "tool_calls", None) or ():
            console.print(printable(f"  -> {call['name']}({call['args']})"), markup=False, highlight=False)
    if row.error:  # a failed task ends with why, whole: its messages alone do not say
        console.print("[bold red]error[/bold red]: ", end="")
        console.print(printable(str(row.error), lines=True), markup=False, highlight=False)
    return 0
