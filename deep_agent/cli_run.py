"""``deep-agent run`` and ``deep-agent demo``: a run with a live tree of tasks.

Example::

    deep-agent run "Compare LangGraph and CrewAI" --model openai:gpt-4.1-mini
    deep-agent run "Now add pricing" --thread 5d1c...      # continue a conversation
    deep-agent demo                                         # offline, scripted

``run`` uses the subagents found in the agent directories (``.agents/agents``
and ``.claude/agents`` under the current directory, then under your home,
or ``--agents-dir``). Its root agent has no tools of its own: it plans and
delegates, and children that inherit tools inherit none.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live

from deep_agent.live_view import TaskTree
from deep_agent.model_choice import choose_model
from deep_agent.state_store import (
    open_async_checkpointer,
    remember_thread,
    resolve_state_dir,
    sessions_dir,
)

ROOT_PROMPT = (
    "You are a planner. Break the user's request into independent pieces, delegate each "
    "to the best-suited subagent with the `task` tool (in parallel when they are "
    "independent), then answer the user from what they return."
)


def add_run_command(commands: Any) -> None:
    run = commands.add_parser("run", help="run a deep agent on a prompt, with a live view of its tasks")
    run.add_argument("prompt")
    run.add_argument("--thread", help="continue this thread (default: a new one)")
    run.add_argument("--model", help="provider:name (default: from OPENAI_API_KEY / OPENAI_BASE_URL)")
    run.add_argument("--agents-dir", action="append", dest="agents_dirs", metavar="DIR",
                     help="agent directory, in precedence order (repeatable)")
    run.add_argument("--force-delegation", action="store_true",
                     help="the first model call of each turn must call task (for small local models)")
    add_state_arguments(run)
    run.set_defaults(handler=run_command)

    demo = commands.add_parser("demo", help="an offline, scripted scenario (no model or key needed)")
    add_state_arguments(demo)
    demo.set_defaults(handler=demo_command)


def add_state_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", help="where threads, ledgers and transcripts live (default: ./.deep_agent)")
    parser.add_argument("--db", dest="db_url", help="a postgresql:// URL instead of the embedded SQLite")


def run_command(args: argparse.Namespace) -> int:
    model = choose_model(args.model)
    from deep_agent.factory import create_deep_agent
    from subagents import discover_agents

    # Default directories that do not exist are skipped; named ones must exist.
    found = discover_agents(args.agents_dirs or None, project_dir=Path.cwd())
    found.raise_for_problems()
    found.emit_warnings()

    def build(checkpointer: Any, sessions: Path) -> Any:
        return create_deep_agent(model, subagents=found.values, system_prompt=ROOT_PROMPT,
                                 checkpointer=checkpointer, sessions_dir=str(sessions),
                                 force_delegation=getattr(args, "force_delegation", False))

    return asyncio.run(_run(build, [args.prompt], args, title="deep agent"))


def demo_command(args: argparse.Namespace) -> int:
    from deep_agent.demo import DEMO_PROMPT, FOLLOW_UP_PROMPT, build_demo_agent, demo_model

    def build(checkpointer: Any, sessions: Path) -> Any:
        return build_demo_agent(demo_model(), checkpointer=checkpointer, sessions_dir=str(sessions))

    console = Console()
    console.print("[bold]Scripted demo[/bold]: offline, on a scripted model; no real LLM is called.")
    return asyncio.run(_run(build, [DEMO_PROMPT, FOLLOW_UP_PROMPT], args,
                            title="deep agent (scripted demo)", console=console))


async def _run(build: Any, prompts: list[str], args: argparse.Namespace, *, title: str,
               console: Console | None = None) -> int:
    """Run each prompt as a turn of one thread; between turns, let background tasks settle."""
    from subagents import wait_for_background

    console = console or Console()
    state = resolve_state_dir(args.state_dir)
    thread_id = getattr(args, "thread", None) or uuid.uuid4().hex
    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": 100}
    view = TaskTree(title)
    async with open_async_checkpointer(state, args.db_url) as saver:
        agent = build(saver, sessions_dir(state))
        remember_thread(state, thread_id)
        for turn, prompt in enumerate(prompts):
            if turn:
                await asyncio.to_thread(wait_for_background, values.get("async_tasks") or {})
                console.print(f"[bold]>[/bold] {prompt}", markup=True)
            with Live(view.render(), console=console, refresh_per_second=8) as live:
                async for namespace, mode, chunk in agent.astream(
                    {"messages": [{"role": "user", "content": prompt}]}, config,
                    stream_mode=["custom", "updates"], subgraphs=True,
                ):
                    if mode == "custom" and isinstance(chunk, dict) and chunk.get("type") == "subagent_task":
                        view.update(chunk)
                        live.update(view.render())
            console.print()
            values = (await agent.aget_state(config)).values
            for record in (values.get("async_tasks") or {}).values():
                console.print(f"  background task {record['id'][:8]} ({record['agent_type']}): "
                              f"{record['status']}", markup=False)
            if turn < len(prompts) - 1:
                console.print(f"[bold]Answer[/bold]: {values['messages'][-1].text}", markup=True)
    messages = values.get("messages", [])
    answer = messages[-1].text if messages else ""
    console.print()
    console.print("[bold]Final answer[/bold]")
    console.print(answer, markup=False)
    console.print(f"\n[dim]thread {thread_id} — continue with --thread {thread_id}; "
                  f"list tasks with: deep-agent tasks {thread_id}[/dim]")
    return 0
