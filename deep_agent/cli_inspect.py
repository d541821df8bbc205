"""``deep-agent tasks`` and ``deep-agent transcript``: reading earlier runs back.

Example::

    deep-agent tasks                 # the ledger of the last thread run here
    deep-agent tasks 5d1c...         # a given thread
    deep-agent transcript 3fa2       # one task's messages (a unique id prefix is enough)
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from deep_agent.state_store import find_task, last_thread, open_checkpointer, read_ledger, resolve_state_dir
from subagents import read_transcript


def add_inspect_commands(commands: Any) -> None:
    tasks = commands.add_parser("tasks", help="list a thread's delegations")
    tasks.add_argument("thread", nargs="?", help="thread id (default: the last thread run here)")
    tasks.set_defaults(handler=tasks_command)
    transcript = commands.add_parser("transcript", help="print one task's transcript")
    transcript.add_argument("task_id", help="a task id, or a unique prefix of one")
    transcript.add_argument("--thread", help="look only in this thread")
    transcript.set_defaults(handler=transcript_command)
    for parser in (tasks, transcript):
        parser.add_argument("--state-dir", help="default: ./.deep_agent")
        parser.add_argument("--db", dest="db_url", help="a postgresql:// URL instead of the embedded SQLite")


def tasks_command(args: argparse.Namespace) -> int:
    state = resolve_state_dir(args.state_dir)
    thread = args.thread or last_thread(state)
    if not thread:
        raise LookupError("no thread given and none run here yet: deep-agent tasks THREAD")
    with open_checkpointer(state, args.db_url) as saver:
        ledger = read_ledger(saver, thread)
    table = Table(title=f"tasks of thread {thread}")
    for column in ("task", "agent", "status", "seconds", "calls", "tokens", "result or error"):
        table.add_column(column)
    for task_id, record in sorted(ledger.items(), key=lambda item: item[1]["started_at"]):
        outcome = record.get("result") if record["status"] == "completed" else record.get("error")
        table.add_row(
            task_id[:12], record["agent_type"], record["status"],
            f"{(record.get('duration_ms') or 0) / 1000:.2f}", str(record.get("model_calls", 0)),
            str(record.get("input_tokens", 0) + record.get("output_tokens", 0)),
            (outcome or "")[:70],
        )
    console = Console()
    console.print(table)
    if not ledger:
        console.print("no delegations in this thread")
    return 0


def transcript_command(args: argparse.Namespace) -> int:
    state = resolve_state_dir(args.state_dir)
    with open_checkpointer(state, args.db_url) as saver:
        thread, record = find_task(saver, args.task_id, args.thread)
        messages = read_transcript(record, thread_id=thread, checkpointer=saver)
    console = Console()
    console.print(f"[bold]task {record['id']}[/bold] ({record['agent_type']}, {record['status']}) "
                  f"in thread {thread}; transcript: {record.get('transcript')}")
    for message in messages:
        console.print(f"[bold]{message.type}[/bold]: ", end="")
        console.print(message.text or "", markup=False)
        for call in getattr(message, "tool_calls", None) or ():
            console.print(f"  -> {call['name']}({call['args']})", markup=False)
    return 0
