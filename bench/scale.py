"""The scale set (``--scale``): does a delegation cost the same at the thousandth as at the first?

* ``scale.sqlite.*`` -- ``sequential`` delegations on one thread with
  ``SqliteSaver``, one parent run each, the two sides' runs alternating:
  how per-run CPU time grows (median of the last 10% of runs over the
  first 10%) and the database's bytes at the end. deepagents keeps no
  ledger, so equal figures mean ours adds O(1) per delegation.
* ``scale.ledger.*`` -- one ledger update at ``records`` records over one
  at 50: the reducer alone, and a whole delegating run on a thread whose
  ledger already holds that many records (``InMemorySaver``); and one
  record's checkpointed bytes for a 20,000-character task and answer over
  a 300-character one. Ours only.
* ``scale.wide`` -- ``calls`` ``task`` calls in one message (``ainvoke``),
  ours capped at ``cap`` at once, theirs uncapped (it has no cap): CPU per
  child, median of ``reps`` runs a side after one small warm-up run each,
  the side that goes first alternating rep by rep.
* ``scale.agents_block`` -- characters of agent listing the parent model
  receives on every call (system prompt and tool schemas) at ``specs``
  subagents, beyond what it receives at one.

Times are CPU medians (``time.process_time``, the whole process), since
wall time moves with the load; wall figures are in ``detail``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import add_messages

from bench.common import (
    OURS,
    THEIRS,
    answer,
    answered,
    cpu_and_wall,
    delegating_agent,
    delegation_middleware,
    median,
    quiet_gc,
    record,
    scripted,
    sides,
    spec,
    theirs_note,
    user,
)
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware._subagents import SubAgentMiddleware
from middleware._task_tool import ledger_entry
from subagents._ledger import LedgerChannel, merge_records
from subagents._settings import DelegationSettings

NAME = "scale"
GOAL_SQLITE = 1.1
GOAL_FLAT = 1.5
GOAL_PEER = 1.0

DELEGATE = "please delegate"


def _delegating_model() -> Any:
    return scripted(rules=[
        ("child job", [answer("done")]),
        (DELEGATE, [{"tool_calls": [tool_call("task", description="child job: answer at once",
                                             subagent_type="worker")]}, "finished"]),
    ])


def _parent(side: str, checkpointer: Any) -> Any:
    model = _delegating_model()
    return create_agent(model, [], system_prompt="You plan and delegate.", checkpointer=checkpointer,
                        middleware=[delegation_middleware(side, [spec("worker", model=model)])])


def _check(state: dict[str, Any], where: str) -> None:
    last_tool = next(m for m in reversed(state["messages"]) if m.type == "tool")
    if not answered(last_tool, "done"):
        raise RuntimeError(f"{where}: unexpected tool result {last_tool.text[:200]!r}")


# -- (a) sequential delegations on SqliteSaver ------------------------------------


def _sequential(runs: int, folder: Path) -> dict[str, dict[str, Any]]:
    """Each side's figures for ``runs`` delegations on its own SQLite thread, the sides' runs alternating.

    Alternating run by run (rather than one side after the other) makes load
    on a shared machine fall on both sides alike.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    names = sides()
    conns = {side: sqlite3.connect(str(folder / f"{side}.sqlite"), check_same_thread=False) for side in names}
    cpu: dict[str, list[float]] = {side: [] for side in names}
    wall: dict[str, list[float]] = {side: [] for side in names}
    try:
        agents = {side: _parent(side, SqliteSaver(conns[side])) for side in names}
        config = {"configurable": {"thread_id": "scale"}}
        quiet_gc()
        for _ in range(runs):
            for side in names:
                c, w, _ = cpu_and_wall(functools.partial(agents[side].invoke, user(DELEGATE), config))
                cpu[side].append(c)
                wall[side].append(w)
        for side in names:
            _check(agents[side].get_state(config).values, f"scale.sqlite ({side})")
    finally:
        for conn in conns.values():
            conn.close()
    tenth = max(1, runs // 10)
    return {side: {
        "growth_cpu": median(cpu[side][-tenth:]) / median(cpu[side][:tenth]),
        "growth_wall": median(wall[side][-tenth:]) / median(wall[side][:tenth]),
        "first_cpu_ms": median(cpu[side][:tenth]) * 1000, "last_cpu_ms": median(cpu[side][-tenth:]) * 1000,
        "total_s": sum(wall[side]), "db_bytes": sum(p.stat().st_size for p in folder.glob(f"{side}.sqlite*")),
    } for side in names}


def _sqlite_records(runs: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as folder:
        found = _sequential(runs, Path(folder))
    theirs = found.get(THEIRS)
    detail = {f"{side}_{k}": v for side, f in found.items() for k, v in f.items()}
    out = []
    for key, measure, unit, what in (
        ("growth_cpu", "growth", "x (last 10% / first 10%, CPU)",
         "Per-run CPU median of the last 10% of runs over the first 10%"),
        ("db_bytes", "db_bytes", "bytes", "Size of the SQLite database (and its WAL) after all runs"),
    ):
        ours_v, theirs_v = found[OURS][key], None if theirs is None else theirs[key]
        out.append(record(
            f"{NAME}.sqlite.{measure}", unit=unit, ours=ours_v, theirs=theirs_v,
            goal=f"ours <= {GOAL_SQLITE} x theirs",
            met=None if theirs_v is None else ours_v <= GOAL_SQLITE * theirs_v,
            sizes={"sequential_delegations": runs, "checkpointer": "SqliteSaver"},
            notes=theirs_note(f"{what}; one parent run with one `task` call each, all on one thread."),
            detail=detail,
        ))
    return out


# -- (b) ledger updates at many records -------------------------------------------


def _ledger(n: int) -> dict[str, dict[str, Any]]:
    return {f"{i:032x}": _record(i) for i in range(n)}


def _record(i: int) -> dict[str, Any]:
    return ledger_entry({
        "id": f"{i:032x}", "agent_type": "worker", "tool_call_id": f"call_{i}", "status": "completed",
        "stop_reason": "completed", "description": "child job: answer at once", "result": answer("done"),
        "error": None, "started_at": 1.0, "finished_at": 1.01, "duration_ms": 10.0, "model_calls": 1,
        "input_tokens": 20, "output_tokens": 80, "cost_usd": 0.0, "transcript": f"memory:{i}",
        "skipped_writes": None,
    })


def _record_bytes_record() -> dict[str, Any]:
    """Checkpointed bytes of one ledger record for a long task and answer, over a short one."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = JsonPlusSerializer()

    def size(chars: int) -> int:
        text = ("x" * chars)
        return len(serde.dumps_typed(ledger_entry({**_record(0), "description": text, "result": text}))[1])

    short, long = size(300), size(20_000)
    return record(f"{NAME}.ledger.record_bytes", unit="x (bytes at 20,000 / at 300 characters)",
                  ours=long / short, theirs=None, goal=f"ours <= {GOAL_FLAT}", met=long / short <= GOAL_FLAT,
                  sizes={"short_chars": 300, "long_chars": 20_000},
                  notes=theirs_note("Serialized bytes of one ledger record whose description and answer "
                                    "are that long. deepagents keeps no ledger: theirs is null."),
                  detail={"bytes_short": short, "bytes_long": long})


def _reducer_us(n: int, updates: int) -> float:
    """CPU microseconds per ledger update as LangGraph applies it at ``n`` records: the write, then the checkpoint."""
    channel = LedgerChannel(dict, merge_records)
    channel.update([_ledger(n)])
    channel.checkpoint()
    fresh = [{f"new{k:028x}": _record(n + k)} for k in range(updates)]
    quiet_gc()
    start = time.process_time()
    for write in fresh:
        channel.update([write])
        channel.checkpoint()
    return (time.process_time() - start) / updates * 1e6


def _messages_us(n: int, updates: int) -> float:
    """CPU microseconds per ``messages`` update on a thread of ``n`` delegations, for scale.

    Each delegation adds at least two messages (the ``task`` call and its
    ToolMessage), and every step of one delegation writes one of them through
    LangGraph's own ``add_messages`` channel: what the parent already pays
    per step at that length, with or without a ledger.
    """
    channel: Any = BinaryOperatorAggregate(list, cast(Any, add_messages))
    history: list[Any] = []
    for i in range(n):
        history += [AIMessage("", id=f"ai-{i}", tool_calls=[{"name": "task", "args": {}, "id": f"call_{i}"}]),
                    ToolMessage(answer("done"), tool_call_id=f"call_{i}", id=f"tool-{i}")]
    channel.update([history])
    fresh = [[ToolMessage(answer("done"), tool_call_id=f"new_{k}", id=f"new-{k}")] for k in range(updates)]
    quiet_gc()
    start = time.process_time()
    for write in fresh:
        channel.update([write])
    return (time.process_time() - start) / updates * 1e6


def _run_at(n: int, runs: int) -> tuple[float, float]:
    """CPU and wall medians (ms) of a delegating run on a thread whose ledger holds ``n`` records."""
    agent = _parent(OURS, InMemorySaver())
    config = {"configurable": {"thread_id": "ledger"}}
    agent.update_state(config, {"subagent_tasks": _ledger(n)})
    agent.invoke(user(DELEGATE), config)
    cpu, wall = [], []
    quiet_gc()
    for _ in range(runs):
        c, w, state = cpu_and_wall(lambda: agent.invoke(user(DELEGATE), config))
        cpu.append(c)
        wall.append(w)
    _check(state, "scale.ledger")
    return median(cpu) * 1000, median(wall) * 1000


def _ledger_records(small: int, large: int, updates: int, runs: int) -> list[dict[str, Any]]:
    reducer = {n: median([_reducer_us(n, updates) for _ in range(3)]) for n in (small, large)}
    messages = {n: median([_messages_us(n, updates) for _ in range(3)]) for n in (small, large)}
    runs_at = {n: _run_at(n, runs) for n in (small, large)}
    sizes = {"records_small": small, "records_large": large}
    return [
        record(f"{NAME}.ledger.reducer", unit=f"x (update at {large} / at {small})",
               ours=reducer[large] / reducer[small], theirs=None, goal=f"ours <= {GOAL_FLAT}",
               met=reducer[large] / reducer[small] <= GOAL_FLAT, sizes={**sizes, "updates": updates},
               notes=theirs_note("CPU per ledger update and checkpoint through the ledger's channel. "
                                 "deepagents keeps no ledger: theirs is null. For scale, detail has "
                                 "one update of LangGraph's own messages channel on a thread of as many "
                                 "delegations (two messages each), which both sides pay every step."),
               detail={"us_small": reducer[small], "us_large": reducer[large],
                       "messages_us_small": messages[small], "messages_us_large": messages[large]}),
        record(f"{NAME}.ledger.run", unit=f"x (run at {large} / at {small})",
               ours=runs_at[large][0] / runs_at[small][0], theirs=None, goal=f"ours <= {GOAL_FLAT}",
               met=runs_at[large][0] / runs_at[small][0] <= GOAL_FLAT, sizes={**sizes, "runs": runs},
               notes=theirs_note("CPU median of one delegating run (InMemorySaver) on a thread whose "
                                 "ledger already holds N records. deepagents keeps no ledger: theirs is null."),
               detail={"cpu_ms_small": runs_at[small][0], "cpu_ms_large": runs_at[large][0],
                       "wall_ms_small": runs_at[small][1], "wall_ms_large": runs_at[large][1]}),
    ]


# -- (c) many task calls in one message -------------------------------------------


def _wide(side: str, calls: int, cap: int | None) -> tuple[float, float]:
    child = scripted(rules=[("part", [answer("part done")])])
    parent = scripted(responses=[
        {"tool_calls": [tool_call("task", description=f"part {i}: answer at once", subagent_type="worker")
                        for i in range(calls)]},
        "all parts done",
    ])
    # Ours without its per-run cap of 50 delegations, which would refuse most of the calls.
    agent: Any = delegating_agent(side, parent, [spec("worker", model=child)], max_concurrent=cap,
                                  uncapped_run=True)
    quiet_gc()
    cpu, wall, state = cpu_and_wall(lambda: asyncio.run(agent.ainvoke(user("run all parts"))))
    answers = [m for m in state["messages"] if m.type == "tool"]
    if len(answers) != calls or not all(answered(m, "part done") for m in answers):
        raise RuntimeError(f"scale.wide: {len(answers)} answers, first {answers[0].text[:100]!r}")
    return cpu / calls * 1000, wall / calls * 1000


def _wide_record(calls: int, cap: int, reps: int) -> dict[str, Any]:
    names = sides()
    for side in names:  # warm-up: the first run in a process pays for imports and caches, on one side only
        _wide(side, min(calls, 50), cap if side == OURS else None)
    per: dict[str, list[tuple[float, float]]] = {}
    for rep in range(reps):
        for side in names[rep % len(names):] + names[:rep % len(names)]:  # each side goes first in turn
            per.setdefault(side, []).append(_wide(side, calls, cap if side == OURS else None))
    cpu = {side: median([c for c, _ in v]) for side, v in per.items()}
    wall = {side: median([w for _, w in v]) for side, v in per.items()}
    theirs = cpu.get(THEIRS)
    return record(
        f"{NAME}.wide", unit="ms CPU per child", ours=cpu[OURS], theirs=theirs,
        goal=f"ours <= {GOAL_PEER} x theirs", met=None if theirs is None else cpu[OURS] <= GOAL_PEER * theirs,
        sizes={"task_calls": calls, "cap": cap, "reps": reps, "mode": "ainvoke"},
        notes=theirs_note("CPU of the whole parent run over the number of children; ours capped, "
                          "theirs uncapped (deepagents has no cap)."),
        detail={f"{side}_wall_ms_per_child": w for side, w in wall.items()},
    )


# -- (d) the agent listing ------------------------------------------------------------


class _PromptMeter(ScriptedChatModel):
    """A scripted model that remembers how many characters of system prompt and tool schemas it got."""

    seen: int = 0

    def _respond(self, messages: list[Any], tools: Any) -> Any:
        system = sum(len(m.text) for m in messages if getattr(m, "type", "") == "system")
        self.seen = system + (len(json.dumps(tools, default=str)) if tools else 0)
        return super()._respond(messages, tools)


def _prompt_chars(side: str, specs: int, *, name_enum: bool = False) -> int:
    model = _PromptMeter(responses=["ok"])
    workers = [spec(f"worker-{i:04d}", model=model, description=f"Worker {i}: handles case {i}.")
               for i in range(specs)]
    enum = DelegationSettings.of(general_purpose=False, name_enum=True)
    delegation = SubAgentMiddleware(workers, settings=enum) if name_enum else delegation_middleware(side, workers)
    agent: Any = create_agent(model, [], system_prompt="You plan and delegate.", middleware=[delegation])
    agent.invoke(user("hello"))
    return model.seen


def _agents_record(specs: int) -> dict[str, Any]:
    chars = {side: _prompt_chars(side, specs) for side in sides()}
    theirs = chars.get(THEIRS)
    with_enum = _prompt_chars(OURS, specs, name_enum=True)
    return record(
        f"{NAME}.agents_block", unit="characters", ours=chars[OURS], theirs=theirs,
        goal=f"ours <= {GOAL_PEER} x theirs", met=None if theirs is None else chars[OURS] <= GOAL_PEER * theirs,
        sizes={"subagents": specs},
        notes=theirs_note("Characters of system prompt and tool schemas the parent model gets on every "
                          "call at N subagents; each name once, in <available_agents>. `detail` has ours "
                          "with name_enum=True (the names again as an enum, up to 25 agents)."),
        detail={"ours_with_name_enum": with_enum,
                "ratio_with_name_enum": None if theirs is None else round(with_enum / theirs, 4)},
    )


def run(quick: bool = False) -> Iterator[dict[str, Any]]:
    """The scale records, each yielded as soon as it is measured (the full set takes many minutes)."""
    sequential, small, large, updates, runs, calls, cap, reps, specs = (
        (12, 5, 50, 20, 3, 12, 4, 1, 20) if quick else (1000, 50, 5000, 200, 15, 2000, 50, 5, 1000))
    for size in (1, 25) if quick else (1, 10, 25, 50, 100, specs):
        yield _agents_record(size)
    yield _record_bytes_record()
    yield from _ledger_records(small, large, updates, runs)
    yield _wide_record(calls, cap, reps)
    yield from _sqlite_records(sequential)
