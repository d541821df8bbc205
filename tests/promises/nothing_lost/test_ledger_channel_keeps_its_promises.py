"""Attacks on the ledger channel: what state shows, what a checkpoint stores, what it costs.

Each test tries to break one promise of :class:`subagents.LedgerChannel`
(README, "The ledger, usage and budgets"): state always shows the ledger as
a plain dict, whole and in insertion order, whatever happened before (runs,
reloads on a fresh connection, forks, ``Overwrite``, interrupts, parallel
writes, records changed long after they were written); a value once
published never changes; a whole ledger is read from one checkpoint and no
history, a delta one is held by a checkpoint only at snapshots; a plain
ledger written before the channel loads.
"""

from __future__ import annotations

import asyncio
import copy
import operator
import random
import sqlite3
from typing import Annotated, Any, NotRequired

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Overwrite, Send, interrupt
from typing_extensions import TypedDict

from helpers.graphs import call, checkpointer, user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import SpecError
from subagents._ledger import saved_value
from subagents._ledger import LedgerChannel
from subagents._ledger import merge_records
from subagents.background import merge_async_records

ANSWER = "done." + " The work is complete; every requested detail is included in this report." * 4
KEY = "subagent_tasks"
SERDE = JsonPlusSerializer()


def rec(i: int, **fields: Any) -> dict[str, Any]:
    return {"id": f"{i:032x}", "agent_type": "worker", "status": "completed", "result": f"r{i}",
            "started_at": 1000.0 + i, **fields}


def ledger(n: int, start: int = 0) -> dict[str, dict[str, Any]]:
    return {f"{i:032x}": rec(i) for i in range(start, start + n)}


def delegating_model(calls: int = 1) -> ScriptedChatModel:
    return ScriptedChatModel(rules=[
        ("child job", [ANSWER]),
        ("please delegate", [{"tool_calls": [tool_call("task", description=f"child job {k}",
                                                       subagent_type="general-purpose")
                                             for k in range(calls)]}, "finished"]),
    ])


def assert_plain(value: Any) -> None:
    assert type(value) is dict
    assert all(type(r) is dict for r in value.values())


def roundtrip(value: Any) -> Any:
    return SERDE.loads_typed(SERDE.dumps_typed(value))


def stored(saver: Any, config: dict[str, Any], key: str = KEY, merge: Any = merge_records) -> Any:
    """The ledger the latest checkpoint of a thread holds, read from the saver as the command line reads it."""
    saved = saver.get_tuple({"configurable": {"checkpoint_ns": "", **config["configurable"]}})
    return saved_value(saver, saved, key, LedgerChannel(dict, merge))


async def state_of(mode: str, agent: Any, config: dict[str, Any]) -> Any:
    return agent.get_state(config) if mode == "sync" else await agent.aget_state(config)


async def seed(mode: str, agent: Any, config: dict[str, Any], values: dict[str, Any]) -> Any:
    if mode == "sync":
        return await asyncio.to_thread(agent.update_state, config, values)
    return await agent.aupdate_state(config, values)


# -- runs, reloads, parallel siblings, on every saver ------------------------------


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_many_runs_and_reloads_show_one_plain_ordered_ledger(kind, mode, tmp_path):
    """125 seeded records, then runs of 1 and of 7 parallel ``task`` calls, crossing chunk edges."""
    config = {"configurable": {"thread_id": "t"}}

    async def go() -> None:
        async with checkpointer(kind, mode, tmp_path) as saver:
            agent = create_deep_agent(delegating_model(7), checkpointer=saver)
            one = create_deep_agent(delegating_model(1), checkpointer=saver)
            await seed(mode, agent, config, {KEY: ledger(125)})
            order = list(ledger(125))
            for graph in (one, agent, one, agent):  # 125 -> 126 -> 133 -> 134 -> 141
                out = await call(mode, graph, user("please delegate"), config)
                assert_plain(out[KEY])
                new = [k for k in out[KEY] if k not in order]
                assert len(new) == (7 if graph is agent else 1)
                order += new
                assert list(out[KEY]) == order
                assert all(out[KEY][k]["status"] == "completed" for k in new)
            shown = (await state_of(mode, agent, config)).values[KEY]
            assert shown == out[KEY] and list(shown) == order
            raw = await asyncio.to_thread(stored, saver, config) if mode == "sync" else shown
            assert list(raw) == order
            expected = copy.deepcopy(shown)
        if kind == "memory":
            return
        async with checkpointer(kind, mode, tmp_path) as again:  # a fresh connection
            agent = create_deep_agent(delegating_model(1), checkpointer=again)
            reloaded = (await state_of(mode, agent, config)).values[KEY]
            assert_plain(reloaded)
            assert reloaded == expected and list(reloaded) == order
            out = await call(mode, agent, user("please delegate"), config)
            assert list(out[KEY])[:-1] == order and len(out[KEY]) == len(order) + 1

    asyncio.run(go())


# -- a published value never changes -------------------------------------------------


def test_values_published_earlier_never_change_after_later_runs():
    saver = InMemorySaver()
    agent = create_deep_agent(delegating_model(3), checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    agent.update_state(config, {KEY: ledger(126)})
    published: list[tuple[Any, Any]] = []

    def keep(value: Any) -> None:
        published.append((value, copy.deepcopy(value)))

    keep(agent.get_state(config).values[KEY])
    for _ in range(3):
        for snapshot in agent.stream(user("please delegate"), config, stream_mode="values"):
            if KEY in snapshot:
                keep(snapshot[KEY])
        keep(agent.invoke(user("please delegate"), config)[KEY])
        keep(agent.get_state(config).values[KEY])
        # A record of the first sealed chunk, and one of the tail, changed long after.
        current = agent.get_state(config).values[KEY]
        first, last = list(current)[0], list(current)[-1]
        agent.update_state(config, {KEY: {first: rec(0, status="error", result="later"),
                                          last: {**current[last], "status": "x"}}})
        keep(agent.get_state(config).values[KEY])
    for value, then in published:
        assert value == then and list(value) == list(then)
    final = agent.get_state(config).values[KEY]
    assert final[f"{0:032x}"]["result"] == "later" and len(final) == 126 + 3 * 6


# -- time travel -----------------------------------------------------------------------


def at(checkpoint_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}


def test_history_forks_and_runs_from_past_checkpoints_show_their_own_ledger(tmp_path):
    conn = sqlite3.connect(tmp_path / "s.sqlite", check_same_thread=False)
    try:
        agent = create_deep_agent(delegating_model(1), checkpointer=SqliteSaver(conn))
        config = {"configurable": {"thread_id": "t"}}
        agent.update_state(config, {KEY: ledger(62)})
        seen: dict[str, dict[str, Any]] = {}
        for _ in range(4):  # 62 -> 66: the first chunk seals on the way
            agent.invoke(user("please delegate"), config)
            snap = agent.get_state(config)
            seen[snap.config["configurable"]["checkpoint_id"]] = copy.deepcopy(snap.values[KEY])
        history = {s.config["configurable"]["checkpoint_id"]: s.values.get(KEY)
                   for s in agent.get_state_history(config)}
        for checkpoint_id, expected in seen.items():
            assert history[checkpoint_id] == expected and list(history[checkpoint_id]) == list(expected)
        head = next(reversed(seen))
        # Fork the 65-record checkpoint: change a sealed record, add one.
        old_id = list(seen)[2]
        past = at(old_id)
        sealed_id = f"{3:032x}"
        forked = agent.update_state(past, {KEY: {sealed_id: rec(3, status="error"), "fork": rec(999)}})
        fork_ledger = agent.get_state(forked).values[KEY]
        assert list(fork_ledger) == [*seen[old_id], "fork"]
        assert fork_ledger[sealed_id]["status"] == "error"
        head_ledger = agent.get_state(at(head)).values[KEY]
        assert head_ledger == seen[head] and head_ledger[sealed_id]["status"] == "completed"
        # Run on from the oldest kept checkpoint (63 records).
        first_id = list(seen)[0]
        out = agent.invoke(user("please delegate"), at(first_id))
        assert list(out[KEY])[:-1] == list(seen[first_id]) and len(out[KEY]) == 64
        again = agent.get_state(at(old_id)).values[KEY]
        assert again == seen[old_id]
    finally:
        conn.close()


# -- Overwrite ---------------------------------------------------------------------------


def test_overwrite_replaces_the_ledger_in_its_own_order_across_reloads(tmp_path):
    conn = sqlite3.connect(tmp_path / "s.sqlite", check_same_thread=False)
    try:
        agent = create_deep_agent(delegating_model(1), checkpointer=SqliteSaver(conn))
        config = {"configurable": {"thread_id": "t"}}
        agent.update_state(config, {KEY: ledger(200)})
        big = ledger(200)
        reordered = {k: big[k] for k in reversed(list(big)[50:150])}  # 100 records, reversed
        agent.update_state(config, {KEY: Overwrite(reordered)})
        assert list(agent.get_state(config).values[KEY]) == list(reordered)
        assert list(agent.get_state(config).values[KEY]) == list(reordered)
        out = agent.invoke(user("please delegate"), config)
        assert list(out[KEY])[:-1] == list(reordered)
        agent.update_state(config, {KEY: Overwrite(ledger(3, 500))})  # smaller than a chunk
        assert agent.get_state(config).values[KEY] == ledger(3, 500)
        agent.update_state(config, {KEY: {"__overwrite__": ledger(70, 600)}})  # the dict form
        shown = agent.get_state(config).values[KEY]
        assert list(shown) == list(ledger(70, 600))
        # Sealed record changed after an overwrite: the new chunk, not the old, is resealed.
        agent.update_state(config, {KEY: {f"{601:032x}": rec(601, status="error")}})
        shown = agent.get_state(config).values[KEY]
        assert shown[f"{601:032x}"]["status"] == "error" and list(shown) == list(ledger(70, 600))
    finally:
        conn.close()


# -- a user's own ledger: partial updates of sealed records by parallel siblings ------------


class Runs(TypedDict):
    runs: NotRequired[Annotated[dict[str, dict[str, Any]], LedgerChannel(dict, merge_async_records)]]
    step: NotRequired[Annotated[int, operator.add]]


def test_fuzz_parallel_partial_updates_match_a_plain_dict_reference():
    """Random steps of many writes each (new records, partial updates anywhere), reloads in between."""
    rng = random.Random(7)
    spec = LedgerChannel(dict, merge_async_records)
    spec.key = "runs"
    channel = spec.copy()
    reference: dict[str, dict[str, Any]] = {}
    history: list[tuple[str, str, Any]] = []
    next_id = 0
    for step in range(160):
        writes: list[Any] = []
        for _ in range(rng.randint(1, 6)):
            write: dict[str, dict[str, Any]] = {}
            for _ in range(rng.randint(1, 5)):
                if reference and rng.random() < 0.5:
                    write[rng.choice(list(reference))] = {"status": f"s{step}", f"f{rng.randint(0, 3)}": step}
                else:
                    write[f"r{next_id:05d}"] = {"id": f"r{next_id:05d}", "status": "queued"}
                    next_id += 1
            writes.append(write)
        if step in (90, 91):
            keep = dict(list(reference.items())[::-2])  # reversed half
            writes = [Overwrite(keep)]
            reference = {k: dict(v) for k, v in keep.items()}
        else:
            for write in writes:
                reference = merge_async_records(reference, write)
        channel.update(writes)
        history.extend(("task", "runs", roundtrip(write)) for write in writes)
        assert channel.get() == reference and list(channel.get()) == list(reference)
        if rng.random() < 0.3:  # a reload: the writes since the thread began, replayed in one batch
            channel = spec.from_checkpoint(None)
            channel.replay_writes(history)
            assert channel.get() == reference and list(channel.get()) == list(reference)
    assert len(reference) > 300


def test_siblings_in_one_step_update_sealed_records_of_a_graph(tmp_path):
    def fan(state: Runs) -> list[Send]:
        return [Send("touch", {"i": i}) for i in range(0, 150, 10)]

    def touch(arg: dict[str, Any]) -> dict[str, Any]:
        i = arg["i"]
        return {"runs": {f"{i:032x}": {"status": "cancelled", "by": i}, f"n{i}": {"id": f"n{i}"}}, "step": 1}

    builder = StateGraph(Runs)
    builder.add_node("seed", lambda s: {"runs": ledger(150)})
    builder.add_node("touch", touch)
    builder.add_edge(START, "seed")
    builder.add_conditional_edges("seed", fan, ["touch"])
    builder.add_edge("touch", END)
    conn = sqlite3.connect(tmp_path / "g.sqlite", check_same_thread=False)
    try:
        graph = builder.compile(checkpointer=SqliteSaver(conn))
        config = {"configurable": {"thread_id": "g"}}
        out = graph.invoke({"step": 0}, config)
        expected = ledger(150)
        for i in range(0, 150, 10):
            expected[f"{i:032x}"] = {**expected[f"{i:032x}"], "status": "cancelled", "by": i}
        for i in range(0, 150, 10):
            expected[f"n{i}"] = {"id": f"n{i}"}
        assert out["runs"] == expected and list(out["runs"]) == list(expected)
        fresh = builder.compile(checkpointer=SqliteSaver(conn))
        shown = fresh.get_state(config).values["runs"]
        assert shown == expected and list(shown) == list(expected)
    finally:
        conn.close()


# -- interrupts ------------------------------------------------------------------------------


def test_interrupt_and_resume_keep_the_ledger_across_a_fresh_connection(tmp_path):
    def ask(state: Runs) -> dict[str, Any]:
        answer = interrupt("approve?")
        return {"runs": {f"{5:032x}": {"status": answer}, "after": {"id": "after"}}}

    builder = StateGraph(Runs)
    builder.add_node("seed", lambda s: {"runs": ledger(140)})
    builder.add_node("ask", ask)
    builder.add_edge(START, "seed")
    builder.add_edge("seed", "ask")
    builder.add_edge("ask", END)
    config = {"configurable": {"thread_id": "i"}}
    path = tmp_path / "i.sqlite"
    with sqlite3.connect(path, check_same_thread=False) as conn:
        graph = builder.compile(checkpointer=SqliteSaver(conn))
        graph.invoke({}, config)
        paused = graph.get_state(config)
        assert paused.next == ("ask",) and paused.values["runs"] == ledger(140)
    with sqlite3.connect(path, check_same_thread=False) as conn:
        graph = builder.compile(checkpointer=SqliteSaver(conn))
        out = graph.invoke(Command(resume="approved"), config)
    expected = ledger(140)
    expected[f"{5:032x}"] = {**expected[f"{5:032x}"], "status": "approved"}
    expected["after"] = {"id": "after"}
    assert out["runs"] == expected and list(out["runs"]) == list(expected)
    assert paused.values["runs"][f"{5:032x}"]["status"] == "completed"


# -- older, damaged and hostile checkpoints -----------------------------------------------------


class OldRuns(TypedDict):
    runs: NotRequired[Annotated[dict[str, dict[str, Any]], merge_records]]


class NewRuns(TypedDict):
    runs: NotRequired[Annotated[dict[str, dict[str, Any]], LedgerChannel(dict, merge_records)]]


def _adder(schema: Any, start: int, count: int) -> Any:
    builder = StateGraph(schema)
    builder.add_node("add", lambda s: {"runs": ledger(count, start)})
    builder.add_edge(START, "add")
    builder.add_edge("add", END)
    return builder


def test_a_plain_ledger_written_before_the_channel_loads_and_grows(tmp_path):
    path = tmp_path / "old.sqlite"
    config = {"configurable": {"thread_id": "old"}}
    with sqlite3.connect(path, check_same_thread=False) as conn:
        _adder(OldRuns, 0, 100).compile(checkpointer=SqliteSaver(conn)).invoke({}, config)
        raw = SqliteSaver(conn).get_tuple(config).checkpoint["channel_values"]["runs"]
        assert len(raw) == 100
    with sqlite3.connect(path, check_same_thread=False) as conn:
        graph = _adder(NewRuns, 100, 30).compile(checkpointer=SqliteSaver(conn))
        assert graph.get_state(config).values["runs"] == ledger(100)
        out = graph.invoke({}, config)
        assert list(out["runs"]) == list(ledger(130))
        assert list(stored(SqliteSaver(conn), config, "runs")) == list(ledger(130))
    with sqlite3.connect(path, check_same_thread=False) as conn:
        assert list(_adder(NewRuns, 0, 0).compile(checkpointer=SqliteSaver(conn))
                    .get_state(config).values["runs"]) == list(ledger(130))




# -- the command line reads long ledgers from its SQLite state -------------------------------


def _row_record(i: int) -> dict[str, Any]:
    return {**rec(i), "tool_call_id": f"call_{i}", "stop_reason": "completed", "description": f"seeded {i}",
            "error": None, "finished_at": 1000.5 + i, "duration_ms": 500.0, "model_calls": 1,
            "input_tokens": 1, "output_tokens": 1, "cost_usd": 0.0, "transcript": "none:",
            "skipped_writes": None, "description_chars": len(f"seeded {i}"), "result_chars": len(f"r{i}"),
            "error_chars": None}


@pytest.mark.server  # starts a Python process of its own
def test_cli_tasks_and_transcript_read_a_long_ledger_stored_as_changes(tmp_path):
    from helpers.cli import cli

    project = tmp_path / "project"
    (project / ".deep_agent").mkdir(parents=True)
    (project / "home").mkdir()
    config = {"configurable": {"thread_id": "long"}}
    with sqlite3.connect(project / ".deep_agent" / "state.sqlite", check_same_thread=False) as conn:
        agent = create_deep_agent(delegating_model(3), checkpointer=SqliteSaver(conn))
        agent.update_state(config, {KEY: {f"{i:032x}": _row_record(i) for i in range(62)}})
        out = agent.invoke(user("please delegate"), config)  # the 3 real tasks straddle the first chunk's edge
        real = [k for k, r in out[KEY].items() if r["agent_type"] == "general-purpose"]
        agent.update_state(config, {KEY: {f"{i:032x}": _row_record(i) for i in range(100, 164)}})
        assert len(stored(SqliteSaver(conn), config)) == 129
    tasks = cli("tasks", "long", cwd=project)
    assert tasks.returncode == 0, tasks.stderr
    assert tasks.stdout.count("worker") == 126 and tasks.stdout.count("general-purpose") == 3
    for task_id in real:
        shown = cli("transcript", task_id[:12], cwd=project)
        assert shown.returncode == 0, shown.stderr
        assert f"task {task_id}" in shown.stdout and ANSWER[:40] in shown.stdout


# -- cost -----------------------------------------------------------------------------------------


class DeltaRuns(TypedDict):
    runs: NotRequired[Annotated[dict[str, dict[str, Any]], LedgerChannel(dict, merge_records, snapshot_frequency=50)]]


def test_checkpoints_of_a_long_delta_ledger_hold_it_only_at_snapshots(tmp_path):
    """Beside delta messages (``create_deep_agent``'s state) a ledger whole in every checkpoint is most of its bytes."""
    path = tmp_path / "c.sqlite"
    config = {"configurable": {"thread_id": "c"}}
    runs = 120
    with sqlite3.connect(path, check_same_thread=False) as conn:
        for k in range(runs):
            _adder(DeltaRuns, k * 10, 10).compile(checkpointer=SqliteSaver(conn)).invoke({}, config)
        rows = conn.execute("select type, checkpoint from checkpoints").fetchall()
        holding = sum("runs" in SERDE.loads_typed(row)["channel_values"] for row in rows)
        whole = len(SERDE.dumps_typed(ledger(runs * 10))[1])
        written = sum(len(row[1]) for row in rows) + conn.execute("select sum(length(value)) from writes").fetchone()[0]
    assert holding <= runs // 50 + 1, f"{holding} of {len(rows)} checkpoints hold the whole ledger"
    # Everything the thread wrote: each record once as a write, plus the snapshots (a plain ledger
    # in every checkpoint wrote about runs / 2 whole ledgers).
    assert written < 6 * whole, (written, whole)
    with sqlite3.connect(path, check_same_thread=False) as conn:
        graph = _adder(DeltaRuns, 0, 0).compile(checkpointer=SqliteSaver(conn))
        assert list(graph.get_state(config).values["runs"]) == list(ledger(runs * 10))


class _NoHistory(SqliteSaver):
    def get_delta_channel_history(self, **kwargs: Any) -> Any:
        raise AssertionError(f"history read for {kwargs.get('channels')}")


def test_a_whole_ledger_is_loaded_from_one_checkpoint_without_reading_history(tmp_path):
    """Before: loading a ledger stored as deltas beside whole messages decoded every checkpoint since its snapshot."""
    config = {"configurable": {"thread_id": "w"}}
    with sqlite3.connect(tmp_path / "w.sqlite", check_same_thread=False) as conn:
        for k in range(60):
            _adder(NewRuns, k, 1).compile(checkpointer=SqliteSaver(conn)).invoke({}, config)
        graph = _adder(NewRuns, 60, 1).compile(checkpointer=_NoHistory(conn))
        assert list(graph.get_state(config).values["runs"]) == list(ledger(60))
        assert list(graph.invoke({}, config)["runs"]) == list(ledger(61))
        assert list(stored(_NoHistory(conn), config, "runs")) == list(ledger(61))


# -- sharing and schemas: promises that do not hold -------------------------------------------------


class Mutating(TypedDict):
    runs: NotRequired[Annotated[dict[str, dict[str, Any]], LedgerChannel(dict, merge_records)]]


def test_a_later_run_that_changes_a_record_in_place_leaves_an_earlier_snapshot_alone():
    def nosy(state: Mutating) -> dict[str, Any]:
        state["runs"][f"{1:032x}"]["seen"] = True
        return {}

    builder = StateGraph(Mutating)
    builder.add_node("nosy", nosy)
    builder.add_edge(START, "nosy")
    builder.add_edge("nosy", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "m"}}
    graph.update_state(config, {"runs": ledger(130)})
    earlier = graph.get_state(config).values["runs"]
    kept = copy.deepcopy(earlier)
    graph.invoke({}, config)
    assert earlier == kept


def test_a_state_schema_redeclaring_the_ledger_with_a_plain_reducer_is_refused_by_name():
    """A schema's own annotation wins over the middleware's: a plain reducer would lose a thread stored as deltas."""
    from langchain.agents import AgentState

    class MyState(AgentState):
        subagent_tasks: NotRequired[Annotated[dict[str, dict[str, Any]], merge_records]]

    with pytest.raises(SpecError, match="state_schema.*'subagent_tasks'.*LedgerChannel"):
        create_deep_agent(delegating_model(), state_schema=MyState)


def test_a_state_schema_declaring_the_ledger_with_its_channel_reads_a_thread_stored_as_deltas():
    from langchain.agents import AgentState

    class MyState(AgentState):
        subagent_tasks: NotRequired[Annotated[dict[str, dict[str, Any]], LedgerChannel(dict, merge_records)]]
        note: NotRequired[str]

    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "s"}}
    create_deep_agent(delegating_model(), checkpointer=saver).update_state(config, {KEY: ledger(70)})
    mine = create_deep_agent(delegating_model(), checkpointer=saver, state_schema=MyState)
    assert mine.get_state(config).values[KEY] == ledger(70)


# -- records only the saver's own serializer can store ------------------------------------------


class Opaque:
    """A value msgpack cannot store: a saver with ``pickle_fallback`` pickles it."""

    def __init__(self, x: int) -> None:
        self.x = x

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.x == self.x

    __hash__ = None  # type: ignore[assignment]


def test_records_only_a_pickling_saver_can_store_stay_plain_and_whole(tmp_path):
    """Before: the channel's own serializer raised once 64 records sealed, though the saver could store them."""
    pickling = JsonPlusSerializer(pickle_fallback=True)
    odd = {f"{i:032x}": rec(i, request=Opaque(i)) for i in (3, 140)}
    config = {"configurable": {"thread_id": "p"}}
    with sqlite3.connect(tmp_path / "p.sqlite", check_same_thread=False) as conn:
        graph = _adder(NewRuns, 0, 200).compile(checkpointer=SqliteSaver(conn, serde=pickling))
        graph.invoke({}, config)
        graph.update_state(config, {"runs": odd})  # a record of sealed chunks 0 and 2 turns unsealable
        fresh = _adder(NewRuns, 200, 1).compile(checkpointer=SqliteSaver(conn, serde=pickling))
        expected = {**ledger(200), **odd}
        assert fresh.get_state(config).values["runs"] == expected
        out = fresh.invoke({}, config)
        assert list(out["runs"]) == list(ledger(201)) and out["runs"][f"{140:032x}"]["request"] == Opaque(140)
        again = fresh.get_state(config).values["runs"]
        assert again == {**expected, **ledger(1, 200)} and list(again) == list(ledger(201))
        fresh.update_state(config, {"runs": {k: rec(int(k, 16)) for k in odd}})
        assert stored(SqliteSaver(conn, serde=pickling), config, "runs") == ledger(201)


# -- background tasks: partial updates of records in a sealed chunk -----------------------------


def _done_async(i: int) -> dict[str, Any]:
    return {"id": f"a{i:04d}", "agent_type": "general-purpose", "runner": "local", "status": "completed",
            "description": f"old job {i}", "created_at": 1000.0 + i, "finished_at": 1001.0 + i,
            "result": f"old {i}", "announced": True}


def test_background_status_updates_reach_records_written_long_before_they_finished(tmp_path):
    from helpers.background import NOTICE, start, started_ids, wait_for
    from langchain.agents import create_agent

    from middleware import BackgroundSubagentMiddleware
    from subagents.background import AsyncTaskRecord

    model = ScriptedChatModel(rules=[
        (NOTICE, ["noted"]),
        ("bg job", [ANSWER]),
        ("PARENT start", [start(*[(f"bg job {k}", "general-purpose") for k in range(4)]), "started"]),
    ], default="ok")
    middleware = BackgroundSubagentMiddleware()
    config = {"configurable": {"thread_id": "bg"}}
    try:
        with sqlite3.connect(tmp_path / "bg.sqlite", check_same_thread=False) as conn:
            agent = create_agent(model, [], middleware=[middleware], checkpointer=SqliteSaver(conn))
            seeded = {f"a{i:04d}": _done_async(i) for i in range(62)}
            agent.update_state(config, {"async_tasks": seeded})
            out = agent.invoke(user("PARENT start"), config)
            ids = started_ids(out["messages"])
            assert len(ids) == 4 and list(out["async_tasks"]) == [*seeded, *ids]
            agent.update_state(config, {"async_tasks": {f"a{i:04d}": _done_async(i) for i in range(66, 130)}})
            assert len(stored(SqliteSaver(conn), config, "async_tasks", merge_async_records)) == 130
            wait_for(lambda: all(middleware.runtime.table.get(i).fields["status"] == "completed" for i in ids))
            later = create_agent(model, [], middleware=[middleware], checkpointer=SqliteSaver(conn))
            out = later.invoke(user("PARENT anything new?"), config)
            shown = later.get_state(config).values["async_tasks"]
        assert shown == out["async_tasks"] and len(shown) == 130
        for task_id in ids:
            record = AsyncTaskRecord.model_validate(shown[task_id])
            assert record.status == "completed" and record.announced and record.result == ANSWER
            assert record.description.startswith("bg job")
        assert all(shown[k] == v for k, v in seeded.items())
        with sqlite3.connect(tmp_path / "bg.sqlite", check_same_thread=False) as conn:
            assert stored(SqliteSaver(conn), config, "async_tasks", merge_async_records) == shown
    finally:
        middleware.close()


# -- Postgres ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_postgres_runs_and_fresh_connections_show_one_plain_ordered_ledger(mode, postgres_url):  # noqa: F811
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    config = {"configurable": {"thread_id": "pg"}}

    async def session(work: Any) -> Any:
        if mode == "sync":
            with PostgresSaver.from_conn_string(postgres_url) as saver:
                saver.setup()
                return await work(saver)
        async with AsyncPostgresSaver.from_conn_string(postgres_url) as saver:
            await saver.setup()
            return await work(saver)

    async def first(saver: Any) -> Any:
        agent = create_deep_agent(delegating_model(3), checkpointer=saver)
        await seed(mode, agent, config, {KEY: ledger(126)})
        for _ in range(2):
            out = await call(mode, agent, user("please delegate"), config)
        await seed(mode, agent, config, {KEY: {f"{5:032x}": rec(5, status="error")}})
        return copy.deepcopy((await state_of(mode, agent, config)).values[KEY]), out

    async def second(saver: Any) -> Any:
        agent = create_deep_agent(delegating_model(1), checkpointer=saver)
        shown = (await state_of(mode, agent, config)).values[KEY]
        history = [s.values.get(KEY) async for s in agent.aget_state_history(config)] if mode == "async" \
            else [s.values.get(KEY) for s in agent.get_state_history(config)]
        return shown, history

    expected, out = asyncio.run(session(first))
    assert len(expected) == 132 and list(expected)[:126] == list(ledger(126))
    assert expected[f"{5:032x}"]["status"] == "error" and list(out[KEY]) == list(expected)
    shown, history = asyncio.run(session(second))
    assert_plain(shown)
    assert shown == expected and list(shown) == list(expected)
    sizes = [len(h) for h in history if h is not None]
    assert sizes[0] == 132 and 126 in sizes and sizes == sorted(sizes, reverse=True)


# -- an approval pause inside a child, on a thread with a long ledger --------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_approval_pause_and_resume_on_a_fresh_connection_keep_a_sealed_ledger(mode, tmp_path):
    from langchain_core.tools import tool

    @tool
    def deploy(target: str) -> str:
        """Deploy (needs approval)."""
        return f"deployed {target}"

    model = ScriptedChatModel(rules=[
        ("deploy job", [{"tool_calls": [tool_call("deploy", target="prod")]}, ANSWER]),
        ("sibling job", [ANSWER]),
    ], responses=[
        {"tool_calls": [tool_call("task", description="deploy job", subagent_type="deployer"),
                        tool_call("task", description="sibling job", subagent_type="general-purpose")]},
        "parent finished",
    ])

    def build(saver: Any) -> Any:
        return create_deep_agent(model, [deploy], checkpointer=saver, subagents=[
            {"name": "deployer", "description": "deploys", "tools": ["deploy"], "interrupt_on": {"deploy": True}}])

    config = {"configurable": {"thread_id": "ap"}}

    async def go() -> None:
        async with checkpointer("sqlite", mode, tmp_path) as saver:
            agent = build(saver)
            await seed(mode, agent, config, {KEY: ledger(127)})
            paused = await call(mode, agent, user("go"), config)
            assert paused["__interrupt__"]
            during = copy.deepcopy((await state_of(mode, agent, config)).values[KEY])
        async with checkpointer("sqlite", mode, tmp_path) as saver:
            agent = build(saver)
            assert (await state_of(mode, agent, config)).values[KEY] == during
            done = await call(mode, agent, Command(resume={"decisions": [{"type": "approve"}]}), config)
            shown = (await state_of(mode, agent, config)).values[KEY]
        assert_plain(done[KEY])
        assert shown == done[KEY] and list(shown)[:127] == list(ledger(127)) and len(shown) == 129
        mine = [r for r in shown.values() if r["agent_type"] in ("deployer", "general-purpose")]
        assert sorted(r["agent_type"] for r in mine) == ["deployer", "general-purpose"]
        assert all(r["status"] == "completed" for r in mine)
        assert all(shown[k] == v for k, v in ledger(127).items())
        sibling = [k for k, r in during.items() if r["agent_type"] == "general-purpose"]
        assert len(sibling) == 1 and shown[sibling[0]] == during[sibling[0]], "the finished sibling ran once"

    asyncio.run(go())
