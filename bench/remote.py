"""The remote set (``python -m bench --remote``): background tasks on a real ``langgraph dev``.

It starts its own ``langgraph dev`` servers (10 and 50 jobs per worker),
serving the project's ``scripted_worker`` graph (offline, instant answers),
and measures:

* **settle time** for N = 10, 50, 200 tasks: ours is one parent turn
  (``ainvoke``) that calls ``start_async_task`` N times, then
  :func:`subagents.wait_for_background` until every task has settled
  (batched polls every 50 ms, and one join at a time while at most 16
  tasks are live: 32 joins open at once were measured slower, since a
  join streams each run to its waiter);
  theirs is raw ``langgraph-sdk`` doing the same work (N threads and runs
  created concurrently, then ``runs.join`` on each, at most 80 at once: the
  SDK's pool has 100 connections). Goal: ours within 1.1x.
* **polling cost per parent turn** with 200 live tasks (slow ones that keep
  running): the time a parent turn spends refreshing them, i.e. a turn with
  200 live tasks minus a turn with none. Goal: under 100 ms.

The servers are stopped at the end; nothing else is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from bench.common import median, record, scripted, user
from bench.dev_server import LangGraphDevServer
from deep_agent._testing import tool_call
from middleware import BackgroundSubagentMiddleware
from subagents._settings import DelegationSettings
from subagents.background import wait_for_background  # the one that also polls remote tasks

NAME = "remote"
ONLY = "langgraph_dev"
"""The name that runs this part of the remote set alone: ``python -m bench --only langgraph_dev``."""
SETTLE_GOAL = 1.1
POLL_EVERY_S = 0.05
"""How often ours polls while waiting (raw joins are told at once, by a server long-poll)."""
POLL_GOAL_MS = 100.0
ROOT = Path(__file__).resolve().parents[1]
RAW_JOINS = 80
"""Joins the raw side keeps open at once (more would wait for the SDK's 100 connections and time out)."""


def parent_middleware(url: str, graph_id: str = "scripted_worker") -> BackgroundSubagentMiddleware:
    # Generous bounds: this measures throughput on a loaded box, not how timeouts bite.
    spec = {"name": "worker", "description": "Works on a LangGraph Server.", "graph_id": graph_id,
            "url": url, "request_timeout_s": 60, "start_timeout_s": 120}
    return BackgroundSubagentMiddleware([spec], settings=DelegationSettings.of(general_purpose=False, notify=True))


def _parent(middleware: BackgroundSubagentMiddleware, jobs: list[str]) -> Any:
    model = scripted(
        rules=[("BENCH start", [{"tool_calls": [tool_call("start_async_task", description=j, subagent_type="worker")
                                                for j in jobs]}, "started"])],
        default="ok",
    )
    return create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())


def _config() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"bench-remote-{uuid.uuid4().hex}"}, "recursion_limit": 1000}


@contextlib.contextmanager
def counted_requests() -> Iterator[list[int]]:
    """``[n]``: the HTTP requests this process sends meanwhile, through any httpx async transport.

    Both sides send through one (ours from the background runtime's loop,
    raw ``langgraph-sdk`` from its own), so the counts compare like for like.
    """
    import httpx

    sent = [0]
    original = httpx.AsyncHTTPTransport.handle_async_request

    async def counting(self: httpx.AsyncHTTPTransport, request: httpx.Request) -> httpx.Response:
        sent[0] += 1
        return await original(self, request)

    httpx.AsyncHTTPTransport.handle_async_request = counting  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        httpx.AsyncHTTPTransport.handle_async_request = original  # type: ignore[method-assign]


def ours_settle(url: str, tasks: int, graph_id: str = "scripted_worker",
                middleware: BackgroundSubagentMiddleware | None = None) -> float:
    """Seconds for one parent turn starting ``tasks`` tasks and a wait for them all.

    ``middleware``: one kept between runs, as a served parent keeps its graph (what its runtime learnt of
    the server, such as aegra refusing a thread search by ids, is not learnt again); default: a new one.
    """
    middleware = middleware or parent_middleware(url, graph_id)
    agent = _parent(middleware, [f"job {i}" for i in range(tasks)])
    began = time.perf_counter()
    state = asyncio.run(agent.ainvoke(user("BENCH start"), _config()))
    ledger = state["async_tasks"]
    if len(ledger) != tasks:
        errors = {m.text[:300] for m in state["messages"] if m.type == "tool" and m.status == "error"}
        raise RuntimeError(f"remote: {len(ledger)} of {tasks} tasks started: {sorted(errors)[:3]}")
    if not wait_for_background(ledger, timeout_s=300, tasks=middleware.tasks, every_s=POLL_EVERY_S):
        raise RuntimeError(f"remote: {tasks} tasks did not settle within 300 s")
    seconds = time.perf_counter() - began
    return seconds


async def _raw(url: str, tasks: int, graph_id: str) -> float:
    from langgraph_sdk import get_client

    # A request waits for one of the pool's connections as long as ours does (its start_timeout_s): with 80
    # joins open, 200 creates share 20 connections, and the SDK's 5 s wait failed them on a busy machine.
    client = get_client(url=url, api_key=None, timeout=(5, 300, 300, 120))
    joins = asyncio.Semaphore(RAW_JOINS)
    began = time.perf_counter()

    async def one(i: int) -> None:
        thread = await client.threads.create(metadata={"bench": "raw"})
        job: dict[str, Any] = {"messages": [{"role": "user", "content": f"job {i}"}]}
        run = await client.runs.create(thread["thread_id"], graph_id, input=job)
        async with joins:  # each join holds a connection; the SDK's pool has 100
            await client.runs.join(thread["thread_id"], run["run_id"])

    await asyncio.gather(*(one(i) for i in range(tasks)))
    seconds = time.perf_counter() - began
    await client.aclose()
    return seconds


def raw_settle(url: str, tasks: int, graph_id: str = "scripted_worker") -> float:
    return asyncio.run(_raw(url, tasks, graph_id))


def polling_cost_ms(url: str, tasks: int, reps: int, graph_id: str = "scripted_worker",
                    job: str = "slow job") -> tuple[float, dict[str, Any]]:
    """Median extra time of a parent turn with ``tasks`` live remote tasks over one with none.

    ``graph_id`` must keep a task described ``<job> <i>`` running for the whole measure.
    """
    middleware = parent_middleware(url, graph_id)
    agent = _parent(middleware, [f"{job} {i}" for i in range(tasks)])
    config = _config()
    state = asyncio.run(agent.ainvoke(user("BENCH start"), config))
    if len(state["async_tasks"]) != tasks:
        raise RuntimeError(f"remote: {len(state['async_tasks'])} of {tasks} slow tasks started")
    idle_agent, idle_config = _parent(parent_middleware(url, graph_id), []), _config()

    def turn(graph: Any, cfg: dict[str, Any]) -> float:
        began = time.perf_counter()
        asyncio.run(graph.ainvoke(user("BENCH turn"), cfg))
        return time.perf_counter() - began

    turn(agent, config)  # warm up: the first poll opens the connections
    live, idle = [], []
    for _ in range(reps):  # interleaved, like the settle runs
        live.append(turn(agent, config))
        idle.append(turn(idle_agent, idle_config))
    live_now = asyncio.run(agent.aget_state(config)).values["async_tasks"].values()
    still = sum(r["status"] in ("pending", "running") for r in live_now)
    return (median(live) - median(idle)) * 1000, {"live_turn_s": median(live), "idle_turn_s": median(idle),
                                                  "live_tasks": still}


def run(quick: bool = False) -> Iterator[dict[str, Any]]:
    """The records, each as soon as it is measured (the servers take minutes)."""
    sizes, jobs, poll_tasks, reps = ((3, 6), (10,), 6, 3) if quick else ((10, 50, 200), (10, 50), 200, 7)
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as tmp:
        for per_worker in jobs:
            workdir = Path(tmp) / f"jobs-{per_worker}"
            workdir.mkdir()
            with LangGraphDevServer(ROOT, workdir, jobs_per_worker=per_worker,
                                    env={"DEEP_AGENT_SCRIPTED": "1"}) as server:
                ours_settle(server.url, 2)  # warm up both sides: graphs loaded, connections open
                raw_settle(server.url, 2)
                for tasks in sizes:
                    yield _settle_record(server.url, tasks, per_worker)
                if per_worker == jobs[-1]:
                    yield _polling_record(server.url, poll_tasks, per_worker, reps)


def _settle_record(url: str, tasks: int, per_worker: int) -> dict[str, Any]:
    reps = 9 if tasks <= 50 else 3  # small N settles in about a second, and noisily: more runs
    ours, theirs = [], []
    for _ in range(reps):  # interleaved, so drift on a shared machine hits both sides alike
        ours.append(ours_settle(url, tasks))
        theirs.append(raw_settle(url, tasks))
    return record(
        f"{NAME}.settle.n{tasks}.jobs{per_worker}",
        unit="s",
        ours=median(ours),
        theirs=median(theirs),
        goal=f"ratio <= {SETTLE_GOAL}",
        met=median(ours) / median(theirs) <= SETTLE_GOAL,
        sizes={"tasks": tasks, "jobs_per_worker": per_worker, "reps": reps, "poll_every_s": POLL_EVERY_S},
        notes="Theirs is raw langgraph-sdk doing the same work (create thread + run, join each). "
        "Ours: one ainvoke parent turn starting every task, then wait_for_background polling every 50 ms.",
    )


def _polling_record(url: str, tasks: int, per_worker: int, reps: int) -> dict[str, Any]:
    cost, detail = polling_cost_ms(url, tasks, reps)
    return record(
        f"{NAME}.poll.n{tasks}",
        unit="ms per parent turn",
        ours=cost,
        theirs=None,
        goal=f"ours < {POLL_GOAL_MS:g}",
        met=cost < POLL_GOAL_MS,
        sizes={"live_tasks": tasks, "jobs_per_worker": per_worker, "reps": reps},
        notes="A parent turn with that many live remote tasks minus a turn with none (median). "
        "No raw-SDK counterpart: theirs is null.",
        detail=detail,
    )
