"""One side of the long-thread measure, in a process of its own: ``python -m bench._long_thread_side SIDE SAVER RUNS``.

``SIDE`` is ``ours`` or ``theirs``, ``SAVER`` ``sqlite``, ``postgres`` or ``memory``; it
prints the side's figures as one JSON line (see :mod:`bench.long_thread`).
A process per side keeps either side's imports, caches and heap out of the
other's figures, which matters most for resident memory.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.common import OURS, THEIRS, answer, answered, median, spec, user
from deep_agent._testing import ScriptedChatModel, tool_call

SAMPLES = 20
"""Points at which the SQLite side's stored bytes are read, for the per-run slope."""

DELEGATE = "please delegate"
LEVELS = ("factory", "middleware")
_THEIR_SPEC_KEYS = ("name", "description", "system_prompt", "tools", "model")


class _Forgetful(ScriptedChatModel):
    """A scripted model that keeps no record of the requests it saw.

    The record holds every call's messages, which on one long thread is
    O(n²) messages held alive: it would be most of either side's memory.
    """

    def _respond(self, messages: list[Any], tools: Any) -> Any:
        try:
            return super()._respond(messages, tools)
        finally:
            self.calls.clear()


def _agent(side: str, checkpointer: Any, level: str = "factory") -> Any:
    """The side's agent with one worker, on a model that delegates once per run.

    ``level`` ``factory``: the side's own ``create_deep_agent``; ``middleware``:
    one ``create_agent`` graph holding the side's delegation middleware and nothing else.
    """
    model = _Forgetful(rules=[
        ("child job", [answer("done")]),
        (DELEGATE, [{"tool_calls": [tool_call("task", description="child job: answer at once",
                                             subagent_type="worker")]}, "finished"]),
    ])
    worker = spec("worker", model=model)
    if level == "middleware":
        from langchain.agents import create_agent

        from bench.common import delegation_middleware

        return create_agent(model, [], system_prompt="You plan and delegate.",
                            middleware=[delegation_middleware(side, [worker])], checkpointer=checkpointer)
    if side == OURS:
        from deep_agent import create_deep_agent

        return create_deep_agent(model, subagents=[worker], system_prompt="You plan and delegate.",
                                 checkpointer=checkpointer)
    from deepagents import create_deep_agent as their_create_deep_agent

    theirs: Any = {k: v for k, v in worker.items() if k in _THEIR_SPEC_KEYS}
    return their_create_deep_agent(model, subagents=[theirs], system_prompt="You plan and delegate.",
                                   checkpointer=checkpointer)


def _check(agent: Any, config: dict[str, Any], runs: int, where: str) -> None:
    messages = agent.get_state(config).values["messages"]
    answers = [m for m in messages if m.type == "tool"]
    if len(answers) != runs or not answered(answers[-1], "done"):
        raise RuntimeError(f"{where}: {len(answers)} tool results for {runs} runs, "
                           f"last {answers[-1].text[:200] if answers else None!r}")


class _Sqlite:
    """A SQLite file: the database's bytes are the file's, read once the connection is closed."""

    def __init__(self, folder: str) -> None:
        self.path = str(Path(folder) / "thread.sqlite")

    @contextlib.contextmanager
    def saver(self) -> Iterator[tuple[Any, Callable[[str], list[tuple[Any, ...]]]]]:
        """A checkpointer on the database, and how to query it."""
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(self.path, check_same_thread=False)
        try:
            yield SqliteSaver(conn), lambda sql: conn.execute(sql).fetchall()
        finally:
            conn.close()  # folds the WAL into the database file

    def db_bytes(self) -> int:
        return sum(p.stat().st_size for p in Path(self.path).parent.glob("thread.sqlite*"))


class _Postgres:
    """A database of its own on a Postgres server: its bytes are its checkpoint tables', indexes and TOAST too."""

    TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")

    def __init__(self, url: str) -> None:
        self.url = url

    @contextlib.contextmanager
    def saver(self) -> Iterator[tuple[Any, Callable[[str], list[tuple[Any, ...]]]]]:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(self.url) as saver:
            saver.setup()

            def query(sql: str) -> list[tuple[Any, ...]]:
                conn: Any = saver.conn  # a connection of its own, not a pool (from_conn_string)
                return [tuple(row.values()) for row in conn.execute(sql).fetchall()]

            yield saver, query

    def db_bytes(self) -> int:
        with self.saver() as (_, query):
            return int(sum(query(f"SELECT pg_total_relation_size('{t}')")[0][0] for t in self.TABLES))


_STORED = {
    "sqlite": "SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0) FROM checkpoints "
              "UNION ALL SELECT coalesce(sum(length(value)), 0) FROM writes",
    # Postgres keeps each channel's value apart (a blob per new version) and the checkpoint itself as JSONB.
    "postgres": "SELECT coalesce(sum(octet_length(checkpoint::text) + octet_length(metadata::text)), 0) "
                "FROM checkpoints UNION ALL SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_blobs "
                "UNION ALL SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_writes",
}
"""Bytes of every checkpoint, its metadata, its channel values and every pending write: what the saver stored."""


def _counts(query: Callable[[str], list[tuple[Any, ...]]]) -> dict[str, int]:
    root = query("SELECT count(*) FROM checkpoints WHERE checkpoint_ns = ''")[0][0]
    every = query("SELECT count(*) FROM checkpoints")[0][0]
    return {"root_checkpoints": int(root), "child_checkpoints": int(every) - int(root)}


def _slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope over (run, figure) points: what each run adds to the figure."""
    if len(points) < 2:
        return float("nan")
    return statistics.linear_regression([p[0] for p in points], [p[1] for p in points]).slope


def _database_side(side: str, runs: int, level: str, saver: str, url: str | None) -> dict[str, Any]:
    config = {"configurable": {"thread_id": "long"}}
    every = max(1, runs // SAMPLES)
    tenth = max(1, runs // 10)
    cpu: list[float] = []
    reads: list[float] = []
    points: list[tuple[int, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-long-thread-") as folder:
        db = _Sqlite(folder) if saver == "sqlite" else _Postgres(str(url))
        with db.saver() as (checkpointer, query):
            agent = _agent(side, checkpointer, level)
            gc.collect()
            wall = time.perf_counter()
            for i in range(1, runs + 1):
                start = time.process_time()
                agent.invoke(user(DELEGATE), config)
                cpu.append(time.process_time() - start)
                if i > runs - tenth:
                    # A read right after each of the last runs: its cost rises and falls with the
                    # distance to the last snapshots, so one read at the very end says little alone.
                    start = time.process_time()
                    agent.get_state(config)
                    reads.append(time.process_time() - start)
                if i % every == 0 or i == runs:
                    points.append((i, sum(int(row[0]) for row in query(_STORED[saver]))))
            wall = time.perf_counter() - wall
            _check(agent, config, runs, f"long_thread.{saver} ({side})")
            counts = _counts(query)
        db_bytes = db.db_bytes()
        reload_cpu, reload_wall = [], []
        with db.saver() as (fresh, _):
            reader = _agent(side, fresh, level)
            reader.get_state(config)  # the graph's own first-use work is not the reload's
            for _ in range(5):  # the saver keeps no cache: each read goes to the database
                start, start_wall = time.process_time(), time.perf_counter()
                reader.get_state(config)
                reload_cpu.append((time.process_time() - start) * 1000)
                reload_wall.append((time.perf_counter() - start_wall) * 1000)
    return {
        "db_bytes": db_bytes, "stored_bytes": points[-1][1], "bytes_per_run": _slope(points),
        "growth_cpu": median(cpu[-tenth:]) / median(cpu[:tenth]),
        "cpu_slope_us": _slope([(i, c * 1e6) for i, c in enumerate(cpu)]),
        "first_cpu_ms": median(cpu[:tenth]) * 1000, "last_cpu_ms": median(cpu[-tenth:]) * 1000,
        "total_cpu_s": sum(cpu), "total_wall_s": wall, "reload_ms": median(reads) * 1000,
        "reload_last_ms": median(reload_cpu), "reload_last_wall_ms": median(reload_wall),
        "root_checkpoints_per_run": counts["root_checkpoints"] / runs,
        "child_checkpoints_per_run": counts["child_checkpoints"] / runs,
    }


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _memory_side(side: str, runs: int, level: str) -> dict[str, Any]:
    from langgraph.checkpoint.memory import InMemorySaver

    config = {"configurable": {"thread_id": "long"}}
    agent = _agent(side, InMemorySaver(), level)
    agent.invoke(user(DELEGATE), config)  # warm-up: imports, compiled child graphs, caches
    gc.collect()
    before = _rss_bytes()
    start = time.process_time()
    for _ in range(runs - 1):
        agent.invoke(user(DELEGATE), config)
    cpu = time.process_time() - start
    gc.collect()
    grown = _rss_bytes() - before
    _check(agent, config, runs, f"long_thread.memory ({side})")
    return {"rss_growth_bytes": grown, "total_cpu_s": cpu}


def main(argv: list[str]) -> None:
    """``python -m bench._long_thread_side SIDE sqlite|postgres|memory RUNS [factory|middleware] [URL]``: one JSON line.

    ``URL`` is the Postgres database the ``postgres`` side writes to (empty: it is its alone).
    """
    side, saver, runs = argv[0], argv[1], int(argv[2])
    level = argv[3] if len(argv) > 3 else "factory"
    url = argv[4] if len(argv) > 4 else None
    if (side not in (OURS, THEIRS) or saver not in ("sqlite", "postgres", "memory") or runs < 2
            or level not in LEVELS or (saver == "postgres") != (url is not None)):
        raise SystemExit("usage: python -m bench._long_thread_side ours|theirs sqlite|postgres|memory RUNS "
                         "[factory|middleware] [POSTGRES_URL, with postgres alone] (RUNS >= 2)")
    found = _memory_side(side, runs, level) if saver == "memory" else _database_side(side, runs, level, saver, url)
    print(json.dumps(found), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
