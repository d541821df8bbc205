"""The ledger channel: state shows a plain dict, whole or stored as what changed.

The promises tried here: nothing a user reads changes (``get_state``, the
values ``invoke`` returns, the command line's reader of raw checkpoints);
records keep their order; a reload (a snapshot, or nothing, plus the writes
since, replayed in one batch) shows what the live channel showed; a
published value never changes afterwards; an older checkpoint holding a
plain dict loads; ``Overwrite`` still replaces; a delta ledger's checkpoint
between snapshots holds no ledger at all, a whole ledger's holds all of it.
"""

from __future__ import annotations

import random
import sqlite3
import uuid
import zlib
from pathlib import Path
from typing import Annotated, Any, NotRequired, TypedDict

import pytest
from helpers.graphs import parent_script, records, user
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import StateGraph
from langgraph.types import Overwrite

from deep_agent import create_deep_agent
from deep_agent.cli._store import read_thread
from deep_agent._testing import ScriptedChatModel
from subagents.background import merge_async_records
from subagents._ledger import LedgerChannel, merge_records, saved_value

SERDE = JsonPlusSerializer()
NOTHING = DeltaChannel(merge_records).checkpoint()  # what LangGraph's own delta channel stores between snapshots
CHUNK_RECORDS = 64  # a size the tests cross, as the packed form of earlier designs sealed records


def _record(i: int, **extra: Any) -> dict[str, Any]:
    return {"id": f"t{i:05d}", "status": "running", "agent_type": "worker", "result": f"answer {i} " * 20,
            "started_at": 1000.0 + i, "input_tokens": i, **extra}


def _ledger(n: int, start: int = 0) -> dict[str, dict[str, Any]]:
    return {f"t{i:05d}": _record(i) for i in range(start, start + n)}


class Logged:
    """A ledger channel and every write it took, so a reload can replay them as LangGraph does."""

    def __init__(self, operator: Any = merge_records, seed: Any = None) -> None:
        self.operator, self.seed, self.log = operator, seed, []
        self.channel = LedgerChannel(dict, operator, snapshot_frequency=50).from_checkpoint(seed)
        self.channel.key = "runs"

    def update(self, values: list[Any]) -> None:
        self.channel.update(values)
        self.log.extend(("task", "runs", SERDE.loads_typed(SERDE.dumps_typed(v))) for v in values)

    def reloaded(self) -> LedgerChannel:
        """The channel as the next run sees it: the seed and every write since, through the saver's serializer."""
        channel = LedgerChannel(dict, self.operator, snapshot_frequency=50).from_checkpoint(self.seed)
        channel.key = "runs"
        channel.replay_writes(self.log)
        return channel


# -- the channel alone ------------------------------------------------------------------


def test_a_checkpoint_between_snapshots_holds_no_ledger() -> None:
    logged = Logged()
    logged.update([_ledger(5 * CHUNK_RECORDS + 7)])
    assert logged.channel.checkpoint() is NOTHING  # LangGraph stores the write, and a snapshot now and then
    again = logged.reloaded()
    assert again.get() == _ledger(5 * CHUNK_RECORDS + 7) and list(again.get()) == list(_ledger(5 * CHUNK_RECORDS + 7))


def test_a_whole_ledger_s_checkpoint_holds_all_of_it_compressed_and_an_empty_write_changes_nothing() -> None:
    channel = LedgerChannel(dict, merge_records)
    assert channel.checkpoint() is NOTHING and not channel.update([{}])
    channel.update([_ledger(300)])
    stored = channel.checkpoint()
    assert channel.checkpoint() is stored, "compressed once per change, not once per checkpoint"
    assert len(SERDE.dumps_typed(stored)[1]) * 4 < len(SERDE.dumps_typed(_ledger(300))[1])
    assert not channel.update([{}]), "no new version: a saver that stores a channel per version stores nothing"
    again = LedgerChannel(dict, merge_records).from_checkpoint(SERDE.loads_typed(SERDE.dumps_typed(stored)))
    assert again.get() == _ledger(300) and list(again.get()) == list(_ledger(300))
    assert again.checkpoint() is not None and again.copy().checkpoint() == stored


def test_a_whole_ledger_reads_back_exactly_whatever_its_records_hold() -> None:
    """Stored as columns with hex ids as bytes: every value, key and order comes back, odd ones too."""
    ids = [f"{i:032x}" for i in range(40)]
    ledger = {i: {"id": i, "transcript": f"checkpoint:tools:{i[:8]}-{i[8:12]}-{i[12:16]}-{i[16:20]}-{i[20:]}",
                  "n": n} for n, i in enumerate(ids)}
    ledger["ABCDEF0123456789ABCDEF0123456789"] = {"id": "ABCDEF0123456789ABCDEF0123456789", "n": None}  # upper case
    ledger["key-not-id"] = {"n": 1, "id": "other", "extra": {"nested": [1.5]}}  # another shape, another key
    ledger["empty"] = {}
    channel = LedgerChannel(dict, merge_records)
    channel.update([ledger])
    again = LedgerChannel(dict, merge_records).from_checkpoint(channel.checkpoint()).get()
    assert again == ledger and list(again) == list(ledger) and [list(r) for r in again.values()] == [
        list(r) for r in ledger.values()]


def test_a_whole_ledger_costs_each_record_its_ids_and_little_more() -> None:
    """A saver that keeps every version (Postgres) stores the whole ledger at each delegation: bytes count squared."""
    draw = random.Random(0)
    ledger = {}
    for n in range(500):
        task_id, child = uuid.UUID(int=draw.getrandbits(128)).hex, uuid.UUID(int=draw.getrandbits(128))
        ledger[task_id] = {**_record(n), "id": task_id, "transcript": f"checkpoint:tools:{child}",
                           "tool_call_id": f"call_{n}", "finished_at": 1000.5 + n + draw.random()}
    channel = LedgerChannel(dict, merge_records)
    channel.update([ledger])
    assert len(channel.checkpoint()) < 64 * len(ledger)  # two random ids alone take 32 bytes; as rows, 85


def test_a_whole_ledger_stored_as_rows_by_an_earlier_release_loads() -> None:
    rows = zlib.compress(SERDE.dumps_typed(_ledger(70))[1], 1)  # the form checkpoints held before columns
    channel = LedgerChannel(dict, merge_records).from_checkpoint(rows)
    assert channel.get() == _ledger(70) and list(channel.get()) == list(_ledger(70))
    channel.update([_ledger(1, start=999)])
    assert LedgerChannel(dict, merge_records).from_checkpoint(channel.checkpoint()).get() == {
        **_ledger(70), **_ledger(1, start=999)}


def test_a_damaged_whole_ledger_is_an_error_naming_the_channel() -> None:
    spec = LedgerChannel(dict, merge_records)
    spec.key = "subagent_tasks"
    for damaged in (b"not zlib", zlib.compress(b"\xc1"), zlib.compress(SERDE.dumps_typed([1, 2])[1])):
        with pytest.raises(ValueError, match="ledger 'subagent_tasks' in the checkpoint does not decode"):
            spec.from_checkpoint(damaged)


def test_a_changed_record_shows_changed_after_a_reload() -> None:
    logged = Logged(merge_async_records)
    logged.update([_ledger(3 * CHUNK_RECORDS + 5)])
    logged.update([{"t00070": {"status": "completed", "result": "done"}}])
    record = logged.reloaded().get()["t00070"]
    assert record["status"] == "completed" and record["result"] == "done" and record["agent_type"] == "worker"
    assert list(logged.reloaded().get()) == list(_ledger(3 * CHUNK_RECORDS + 5))


def test_parallel_writes_in_one_step_all_land() -> None:
    logged = Logged()
    logged.update([_ledger(CHUNK_RECORDS - 2)])
    logged.update([_ledger(1, start=500), _ledger(1, start=501), _ledger(1, start=502)])
    assert len(logged.reloaded().get()) == CHUNK_RECORDS + 1
    assert list(logged.reloaded().get())[-3:] == ["t00500", "t00501", "t00502"]


def test_writes_of_one_step_to_the_same_task_merge_in_order() -> None:
    logged = Logged(merge_async_records)
    logged.update([_ledger(CHUNK_RECORDS + 1)])
    logged.update([{"t00002": {"status": "completed"}}, {"t00002": {"result": "ok"}},
                   {"t00002": {"status": "failed"}}, _ledger(1, start=800)])
    record = logged.reloaded().get()["t00002"]
    assert (record["status"], record["result"], record["agent_type"]) == ("failed", "ok", "worker")
    assert list(logged.reloaded().get())[-1] == "t00800"
    assert logged.reloaded().get() == logged.channel.get()


_WRITES = st.lists(st.dictionaries(st.sampled_from([f"t{i:05d}" for i in range(8)]),
                                   st.dictionaries(st.sampled_from(["status", "result", "n"]), st.integers(0, 9),
                                                   min_size=1), min_size=1, max_size=2),
                   min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(writes=_WRITES, reducer=st.sampled_from([merge_records, merge_async_records]))
def test_one_step_of_sibling_writes_equals_applying_them_one_by_one(writes, reducer) -> None:
    together, one_by_one = LedgerChannel(dict, reducer), LedgerChannel(dict, reducer)
    together.update([_ledger(3)])
    one_by_one.update([_ledger(3)])
    together.update(writes)
    for write in writes:
        one_by_one.update([write])
    assert together.get() == one_by_one.get()
    assert list(together.get()) == list(one_by_one.get())


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(_WRITES, min_size=1, max_size=5), reducer=st.sampled_from([merge_records, merge_async_records]))
def test_a_reload_replaying_many_steps_at_once_shows_what_they_made_step_by_step(steps, reducer) -> None:
    logged = Logged(reducer, seed=_ledger(3))
    for writes in steps:
        logged.update(writes)
    again = logged.reloaded()
    assert again.get() == logged.channel.get() and list(again.get()) == list(logged.channel.get())


def test_a_published_value_never_changes_afterwards() -> None:
    channel = LedgerChannel(dict, merge_async_records)
    channel.update([_ledger(2 * CHUNK_RECORDS)])
    seen = channel.get()
    snapshot = {k: dict(v) for k, v in seen.items()}
    channel.update([{"t00001": {"status": "failed"}}, _ledger(3, start=900)])
    channel.checkpoint()
    assert seen == snapshot
    assert channel.get()["t00001"]["status"] == "failed"


def test_a_copy_is_independent_of_its_original() -> None:
    channel = Logged(seed=_ledger(2 * CHUNK_RECORDS + 3)).channel
    channel.get()
    twin = channel.copy()
    twin.update([_ledger(CHUNK_RECORDS, start=700), {"t00001": {"status": "failed"}}])
    assert twin.get() == {**_ledger(2 * CHUNK_RECORDS + 3), **_ledger(CHUNK_RECORDS, start=700),
                          "t00001": {"status": "failed"}}
    other = channel.copy()
    other.update([{"t00002": {"status": "failed"}}])
    channel.update([_ledger(1, start=900)])  # the original goes on as if the twins never were
    assert channel.get() == {**_ledger(2 * CHUNK_RECORDS + 3), **_ledger(1, start=900)}


def test_overwrite_replaces_the_whole_ledger_across_a_reload() -> None:
    logged = Logged(seed=_ledger(3 * CHUNK_RECORDS))
    logged.update([Overwrite(_ledger(2))])
    assert logged.channel.get() == _ledger(2) and logged.reloaded().get() == _ledger(2)
    logged = Logged(seed=_ledger(3 * CHUNK_RECORDS))
    logged.update([{"__overwrite__": _ledger(CHUNK_RECORDS + 1, start=50)}])  # the JSON-crossed form
    logged.update([_ledger(1, start=999)])
    assert logged.reloaded().get() == {**_ledger(CHUNK_RECORDS + 1, start=50), **_ledger(1, start=999)}


def test_an_overwrite_with_something_else_than_records_is_an_error_naming_the_channel() -> None:
    channel = Logged(seed=_ledger(3)).channel
    with pytest.raises(ValueError, match="ledger 'runs': Overwrite needs a dict"):
        channel.update([Overwrite(["not", "records"])])
    assert channel.get() == _ledger(3)


def test_a_plain_dict_from_an_older_checkpoint_loads_and_grows() -> None:
    old = _ledger(CHUNK_RECORDS * 2)  # how every checkpoint stored a ledger before packing
    logged = Logged(seed=old)
    assert logged.channel.get() == old
    logged.update([_ledger(1, start=999)])
    assert logged.reloaded().get() == {**old, **_ledger(1, start=999)}


def test_only_what_langgraph_takes_for_an_overwrite_replaces_the_ledger() -> None:
    logged = Logged(seed=_ledger(CHUNK_RECORDS + 2))
    odd = {"__overwrite__": _record(1), "type": _record(2)}  # task ids that merely look like the sentinels
    logged.update([odd])
    assert len(logged.reloaded().get()) == CHUNK_RECORDS + 4


def test_a_channel_without_a_reducer_is_refused_with_a_clear_error() -> None:
    with pytest.raises(TypeError, match="reducer"):
        LedgerChannel(dict)


# -- in a graph, on a real checkpointer -----------------------------------------------


class _State(TypedDict):
    ledger: NotRequired[Annotated[dict[str, dict[str, Any]],
                                  LedgerChannel(dict, merge_async_records, snapshot_frequency=50)]]
    n: int


def _graph(saver: Any) -> Any:
    def add(state: _State) -> dict[str, Any]:
        n = state["n"]
        return {"ledger": _ledger(1, start=n) | ({"t00003": {"status": "completed"}} if n == 150 else {})}

    builder = StateGraph(_State)
    builder.add_node("add", add)
    builder.set_entry_point("add")
    return builder.compile(checkpointer=saver)


def test_a_graph_on_sqlite_reads_back_every_record_from_a_new_connection(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    config = {"configurable": {"thread_id": "t"}}
    with sqlite3.connect(path, check_same_thread=False) as conn:
        graph = _graph(SqliteSaver(conn))
        for n in range(160):
            out = graph.invoke({"n": n}, config)
    assert len(out["ledger"]) == 160 and list(out["ledger"]) == list(_ledger(160))
    with sqlite3.connect(path, check_same_thread=False) as conn:
        saver = SqliteSaver(conn)
        values = _graph(saver).get_state(config).values
        raw = saver.get_tuple(config).checkpoint["channel_values"].get("ledger")
        read = saved_value(saver, saver.get_tuple(config), "ledger",
                           LedgerChannel(dict, merge_async_records, snapshot_frequency=50))
        history = list(_graph(saver).get_state_history(config))
    assert values["ledger"]["t00003"]["status"] == "completed"
    assert values["ledger"]["t00004"]["status"] == "running"
    assert raw is None and read == values["ledger"]  # no whole ledger stored here: the read replays writes
    # An older checkpoint still shows the ledger as it was then.
    assert len(history[-150].values.get("ledger", {})) < len(values["ledger"])


def test_the_deep_agent_ledger_is_stored_as_changes_and_the_command_line_reads_it(tmp_path: Path) -> None:
    parent = ScriptedChatModel(rules=[("job", ["done"]), ("go", parent_script(("job", "general-purpose")))])
    path = tmp_path / "state.sqlite"
    config = {"configurable": {"thread_id": "many"}}
    with sqlite3.connect(path, check_same_thread=False) as conn:
        agent = create_deep_agent(parent, checkpointer=SqliteSaver(conn))
        for _ in range(CHUNK_RECORDS + 2):
            out = agent.invoke(user("go"), config)
        assert len(records(out)) == CHUNK_RECORDS + 2
        assert "subagent_tasks" not in SqliteSaver(conn).get_tuple(config).checkpoint["channel_values"]
        assert read_thread(SqliteSaver(conn), "many")["subagent_tasks"] == out["subagent_tasks"]
        assert read_thread(SqliteSaver(conn), "many")["subagent_tasks"] == out["subagent_tasks"]


def test_in_memory_saver_keeps_the_ledger_across_runs() -> None:
    channel_graph = _graph(InMemorySaver())
    config = {"configurable": {"thread_id": "m"}}
    for n in range(2 * CHUNK_RECORDS + 1):
        channel_graph.invoke({"n": n}, config)
    assert list(channel_graph.get_state(config).values["ledger"]) == list(_ledger(2 * CHUNK_RECORDS + 1))
