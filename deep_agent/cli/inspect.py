"""``deep-agent tasks`` and ``deep-agent transcript``: reading earlier runs back.

Both show every task of a thread: ``task`` delegations, calls refused
before a child ran, and background tasks (see :mod:`deep_agent.cli.inspect`).
They only read: a failed lookup leaves no state folder behind.

Example::

    deep-agent tasks                 # the tasks of the last thread run here
    deep-agent tasks 5d1c...         # a given thread
    deep-agent transcript 3fa2       # one task's messages (a unique id prefix is enough)
"""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table
from rich.text import Text

from deep_agent.cli.live_view import clipped
from deep_agent.cli.store import (
    find_task,
    last_thread,
    open_checkpointer,
    read_thread,
    resolve_state_dir,
    task_rows,
)
from deep_agent.cli.terminal import printable
from subagents import read_transcript


def tasks_command(args: argparse.Namespace) -> int:
    state = resolve_state_dir(args.state_dir, create=False)
    thread = args.thread or last_thread(state)
    if not thread:
        raise LookupError("no thread given and none run here yet: deep-agent tasks THREAD")
    with open_checkpointer(state, args.db_url) as saver:
        rows = task_rows(read_thread(saver, thread))
    # Thread ids and ledger text (a child's answer) are data: never read as markup, control characters escaped.
    table = Table(title=Text(f"tasks of thread {printable(thread)}"))
    for column in ("task", "agent", "kind", "status", "time", "calls", "tokens"):
        table.add_column(column, no_wrap=True)
    table.add_column("result or error", overflow="fold")
    for row in rows:
        kind = row.kind if row.kind != "background" else f"background {row.runner} #{row.attempt or 1}"
        outcome = " ".join(row.outcome.split())
        cells = (row.id[:8], row.agent_type, kind, row.status, row.timing(), str(row.model_calls),
                 str(row.tokens), outcome if args.full else clipped(outcome, OUTCOME_CHARS))
        table.add_row(*(Text(printable(cell)) for cell in cells))
    console = Console()
    console.print(table)
    if not rows:
        console.print("no tasks in this thread")
    return 0


OUTCOME_CHARS = 70
"""Characters of a result or error the ``tasks`` table shows; ``--full`` shows all of it."""


def transcript_command(args: argparse.Namespace) -> int:
    state = resolve_state_dir(args.state_dir, create=False)
    console = Console()
    with open_checkpointer(state, args.db_url) as saver:
        thread, row = find_task(saver, args.task_id, args.thread)
        about = (f" ({row.agent_type}, {row.kind}, {row.status}) in thread {thread}; "
                 f"transcript: {row.transcript or 'none'}")
        header = Text.assemble((f"task {printable(row.id)}", "bold"), printable(about))
        console.print(header, highlight=False)
        if row.kind == "refused" or not row.transcript:
            console.print(printable(f"it ran no child ({row.status}): {row.outcome}", lines=True),
                          markup=False, highlight=False)
            return 0
        messages = read_transcript({"id": row.id, "transcript": row.transcript}, thread_id=thread,
                                   checkpointer=saver)
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
