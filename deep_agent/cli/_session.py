"""The turns of one command-line run: stream with a live tree, ask for approvals, summarise. A turn that fails leaves
the thread as it was (docs/cli.md); the tasks it cut short are recorded ``cancelled`` here: a delegation records itself
when its tool call returns, and Ctrl-C (or a failing sibling) came first."""

from __future__ import annotations

import argparse
import contextlib
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langgraph.types import Command
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from deep_agent.cli._approvals import TerminalAsker, decide, end_line, settle_background, unsettled
from deep_agent.cli._errors import warnings_as_lines
from deep_agent.cli._live_view import UNFINISHED, TaskTree, live_background, relayed_stderr, turn_waiting
from deep_agent.cli._store import (
    TaskRow,
    check_thread_id,
    open_async_checkpointer,
    remember_thread,
    resolve_state_dir,
    seconds_text,
    sessions_dir,
    task_rows,
)
from deep_agent.cli._terminal import printable
from middleware._task_tool import ASYNC_LEDGER_KEY, LEDGER_KEY, ledger_entry
from subagents._metering import token_count
from subagents._outcome import TaskRecord
from subagents._runner import stop_on_ctrl_c, stop_requested
from subagents._transcripts import jsonl_path, read_jsonl

UNKNOWN = "–"  # the cost without prices, never a made-up 0.0


def summary_table(rows: Sequence[TaskRow], root_usage: Mapping[str, int], *, root_model: str | None,
                  prices: Mapping[str, Any] | None, root_seconds: float, root_waiting: float = 0.0) -> Table:
    """The per-agent-type table of one turn: the root, each agent type, the total; times are work time, waiting
    apart (``root_seconds``: the turn's whole time, ``root_waiting``: its time at approval prompts)."""
    from subagents import cost_of

    table = Table(title="summary", title_justify="left")
    for column in ("agent", "tasks", "model calls", "tokens", "time", "cost"):
        table.add_column(column, justify="left" if column == "agent" else "right")
    root_cost = cost_of(prices, root_model, root_usage.get("input_tokens", 0), root_usage.get("output_tokens", 0))
    root_waiting = turn_waiting(root_waiting, rows)
    root_time = seconds_text(max(0.0, root_seconds - root_waiting), root_waiting)
    lines = [("(root)", len(rows), root_usage.get("model_calls", 0),
              root_usage.get("input_tokens", 0) + root_usage.get("output_tokens", 0), root_time, root_cost)]
    for agent in sorted({row.agent_type for row in rows}):
        group = [row for row in rows if row.agent_type == agent]
        lines.append((agent, len(group), sum(r.model_calls for r in group), sum(r.tokens for r in group),
                      seconds_text(sum(r.seconds() for r in group), sum(r.waiting() for r in group)),
                      sum(r.cost_usd for r in group)))
    for agent, tasks, calls, tokens, seconds, cost in lines:
        # An agent type may be what a model asked for (a refused call's): data, never markup, escapes shown.
        table.add_row(Text(printable(agent)), str(tasks), str(calls), str(tokens), seconds, _cost(cost, prices))
    table.add_row("total", str(len(rows)), str(sum(line[2] for line in lines)), str(sum(line[3] for line in lines)),
                  root_time, _cost(sum(line[5] for line in lines), prices), style="bold")
    return table


def _cost(value: float, prices: Mapping[str, Any] | None) -> str:
    return f"${value:.4f}" if prices else UNKNOWN


async def run_turns(setup: Any, prompts: list[str], args: argparse.Namespace, *, title: str,
                    console: Console) -> int:
    thread_id = check_thread_id(getattr(args, "thread", None) or uuid.uuid4().hex, args.db_url)  # demo: no --thread
    state = resolve_state_dir(args.state_dir)
    # No recursion limit of the CLI's own: max_root_turns ends a looping root with its message.
    config = {"configurable": {"thread_id": thread_id}}
    # One Ctrl-C handler for the whole run, in place before the graph starts (see subagents._runner).
    with stop_on_ctrl_c(), warnings_as_lines():
        async with open_async_checkpointer(state, args.db_url) as saver:
            agent = setup.build(saver, sessions_dir(state))
            remember_thread(state, thread_id)
            ask = TerminalAsker(console)  # one for the run: an "always" answer holds for its later turns
            for turn, prompt in enumerate(prompts):
                if turn:
                    console.print(Text.assemble((">", "bold"), " ", printable(prompt, lines=True)), highlight=False)
                tree = await _turn(agent, config, prompt, setup, title, console, sessions_dir(state), ask)
                values = (await agent.aget_state(config)).values
                messages = values.get("messages") or []
                console.print(f"\n[bold]{'Final answer' if turn == len(prompts) - 1 else 'Answer'}[/bold]")
                # The answer is model text: its lines are kept, but no escape sequence in it reaches the terminal.
                console.print(Text(printable(messages[-1].text if messages else "", lines=True)), highlight=False)
                ids = {row.id for row in tree.rows()}  # this turn's tasks, with their final records
                console.print(summary_table(
                    [row for row in task_rows(values) if row.id in ids] or tree.rows(), tree.root_usage,
                    root_model=tree.root_model, prices=setup.prices,
                    root_seconds=(tree.finished or time.monotonic()) - tree.started, root_waiting=tree.waiting_s))
    shown = printable(thread_id)  # a --thread of the user's: data, never markup
    console.print(Text(f"thread {shown} — continue with --thread {shown}; list tasks with: deep-agent tasks {shown}",
                       style="dim"))
    return 0


async def _turn(agent: Any, config: dict[str, Any], prompt: str, setup: Any, title: str,
                console: Console, sessions: Path, ask: TerminalAsker) -> TaskTree:
    before = (await agent.aget_state(config)).values
    kept = len(before.get("messages") or [])
    tree = TaskTree(title, colors=setup.colors, earlier={row.id for row in task_rows(before)})
    inputs: Any = {"messages": [{"role": "user", "content": prompt}]}
    try:
        while True:
            try:
                with relayed_stderr(console), Live(tree, console=console, refresh_per_second=8):
                    await _stream(agent, inputs, config, tree, sessions)
                    interrupts = (await agent.aget_state(config)).interrupts
                    if not interrupts and not unsettled(tree):
                        tree.stop_clock()
            finally:
                end_line(console)
            if not interrupts:
                break
            asked = time.monotonic()
            inputs = Command(resume=decide(interrupts, ask=ask, approve_all=setup.approve_all, always=ask.always,
                                           announce=lambda line: console.print(Text(printable(line), style="magenta"))))
            tree.waiting_s += time.monotonic() - asked
    except BaseException:
        _cut_short(tree, config, sessions)
        await _undo_failed_turn(agent, config, tree, sessions, kept)
        raise
    try:  # wait for this turn's local background tasks (asking for their approvals); record how they ended
        await settle_background(tree, console, ask=ask, approve_all=setup.approve_all)
    except BaseException:
        with contextlib.suppress(Exception):  # the error that stopped the wait is the one to report
            await _record_background(agent, config, tree)
        raise
    finally:
        tree.stop_clock()
    await _record_background(agent, config, tree)
    if stop_requested():  # pressed as the turn ended: the run still ends as interrupted
        raise KeyboardInterrupt
    return tree


async def _record_background(agent: Any, config: dict[str, Any], tree: TaskTree) -> None:
    """Write into the ledger what this process knows of the turn's background tasks that it does not."""
    ledger = (await agent.aget_state(config)).values.get(ASYNC_LEDGER_KEY) or {}
    updates: dict[str, dict[str, Any]] = {}
    for task_id in tree.background:
        record = ledger.get(task_id) or {}
        changed = {k: v for k, v in live_background(task_id).items() if k != "announced" and record.get(k) != v}
        if "status" in changed:
            changed["announced"] = False  # the parent is told how it ended, at its next turn
        if changed:
            updates[task_id] = changed
            tree.background[task_id].update(changed)
    if updates:
        # The ledger otherwise learns the outcome only at the next turn (or never, once we exit).
        await agent.aupdate_state(config, {ASYNC_LEDGER_KEY: updates}, as_node="model")


async def _stream(agent: Any, inputs: Any, config: dict[str, Any], tree: TaskTree, sessions: Path) -> None:
    """One stretch of the run (to its end or an approval); Ctrl-C ends it as ``KeyboardInterrupt``: LangGraph may
    turn a cancellation into an error or swallow it, so the handler's flag decides, read at each step and the end."""
    try:
        async with contextlib.aclosing(agent.astream(inputs, config, stream_mode=["custom", "updates"],
                                                     subgraphs=True)) as stream:
            async for namespace, mode, chunk in stream:
                tree.feed(namespace, mode, chunk)
                if stop_requested():
                    raise KeyboardInterrupt
        if stop_requested():
            raise KeyboardInterrupt
    except BaseException as exc:
        _cut_short(tree, config, sessions)  # before the view's last frame: every task the turn started, none running
        if stop_requested() and not isinstance(exc, KeyboardInterrupt):
            raise KeyboardInterrupt from exc
        raise


def _cut_short(tree: TaskTree, config: dict[str, Any], sessions: Path) -> None:
    add_unseen_tasks(tree, config["configurable"]["thread_id"], sessions)
    tree.cut_short("interrupted" if stop_requested() else "failed")  # how the root's line reads


async def _undo_failed_turn(agent: Any, config: dict[str, Any], tree: TaskTree, sessions: Path, kept: int) -> None:
    """Write the turn's unfinished delegations into the ledger as cancelled, then remove the messages it added (its
    task records stay). Never raises: the turn's own error (or Ctrl-C) is the one to report."""
    from langchain_core.messages import RemoveMessage

    with contextlib.suppress(BaseException):
        if records := cut_short_records(tree, config["configurable"]["thread_id"], sessions):
            await agent.aupdate_state(config, {LEDGER_KEY: records}, as_node="model")
    with contextlib.suppress(BaseException):
        messages = (await agent.aget_state(config)).values.get("messages") or []
        if added := [m for m in messages[kept:] if getattr(m, "id", None)]:
            await agent.aupdate_state(config, {"messages": [RemoveMessage(id=m.id) for m in added]}, as_node="model")


REASON = "cancelled: the run ended (Ctrl-C or an error) before the task did"


def cut_short_records(tree: TaskTree, thread_id: str, sessions: Path) -> dict[str, dict[str, Any]]:
    """Ledger records, as ``cancelled``, for this turn's delegations that started and never recorded an end."""
    now = time.time()
    calls = _calls(tree)
    records: dict[str, dict[str, Any]] = {}
    for row in tree.rows():
        if row.kind != "task" or row.status not in UNFINISHED | {"cancelled"} or row.id in tree.sync:
            continue
        args = (calls.get(row.tool_call_id) or {}).get("args") or {}
        transcript = jsonl_path(sessions, thread_id, row.id)
        started = row.started_at if row.started_at is not None else now
        record = TaskRecord(
            id=row.id, agent_type=row.agent_type, tool_call_id=row.tool_call_id, status="cancelled",
            stop_reason="cancelled", description=str(args.get("description") or ""), error=REASON,
            started_at=started, finished_at=now, duration_ms=round(row.seconds(now) * 1000, 3),
            waiting_ms=round(row.waiting(now) * 1000, 3), model_calls=row.model_calls,
            input_tokens=row.input_tokens, output_tokens=row.output_tokens,
            transcript=f"jsonl:{transcript}" if transcript.is_file() else None,
        )
        records[row.id] = ledger_entry(record.model_dump())
    return records


def add_unseen_tasks(tree: TaskTree, thread_id: str, sessions: Path) -> None:
    """Put in the tree, as ``cancelled``, this turn's ``task`` calls that have a transcript and no row (a Ctrl-C
    as a child starts can end the stream before its events arrive). Never raises."""
    with contextlib.suppress(Exception):  # an unreadable folder or file: the tree keeps what it saw
        folder = jsonl_path(sessions, thread_id, "x").parent
        paths = list(folder.glob("agent-*.jsonl")) if folder.is_dir() else []
        calls = _calls(tree)
        for path in paths:
            if path.stat().st_mtime < tree.started_at:
                continue
            header, messages = read_jsonl(path)
            meta = header["metadata"] if isinstance(header.get("metadata"), dict) else {}
            task_id, call_id = header.get("id"), meta.get("tool_call_id")
            if not isinstance(task_id, str) or task_id in tree.live or task_id in tree.sync or call_id not in calls:
                continue
            spent = [getattr(m, "usage_metadata", None) or {} for m in messages if m.type == "ai"]
            tree.live[task_id] = {
                "agent_type": str(meta.get("agent_type") or "?"), "tool_call_id": call_id, "status": "cancelled",
                "started_at": path.stat().st_ctime, "model_calls": len(spent),
                "input_tokens": sum(token_count(s.get("input_tokens")) for s in spent),
                "output_tokens": sum(token_count(s.get("output_tokens")) for s in spent),
            }


def _calls(tree: TaskTree) -> dict[Any, Any]:
    return {call.get("id"): call for message in tree.messages for call in getattr(message, "tool_calls", None) or ()}
