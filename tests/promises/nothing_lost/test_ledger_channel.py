"""The ledger channel: state shows a plain dict, checkpoints reuse sealed compressed chunks.

The promises tried here: nothing a user reads changes (``get_state``, the
values ``invoke`` returns, the command line's reader of raw checkpoints);
records keep their order; a record of a sealed chunk that changes is seen
changed after a reload; a published value never changes afterwards; an
older checkpoint holding a plain dict loads; ``Overwrite`` still replaces;
a damaged chunk is an error naming the channel; and a checkpoint of a long
ledger costs a fraction of its plain bytes and reuses what it sealed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Annotated, Any, NotRequired, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import StateGraph
from langgraph.types import Overwrite

from helpers.graphs import parent_script, records, user
from deep_agent import create_deep_agent
from deep_agent.cli.store import read_ledger, read_thread
from deep_agent.testing import ScriptedChatModel
from subagents.ledger import LedgerChannel, ledger_from_checkpoint
from subagents.outcome import merge_records
from subagents.ledger import CHUNK_RECORDS, PACKED_MARK, is_packed
from subagents.background import merge_async_records

SERDE = JsonPlusSerializer()


def _record(i: int, **extra: Any) -> dict[str, Any]:
    return {"id": f"t{i:05d}", "status": "running", "agent_type": "worker", "result": f"answer {i} " * 20,
            "started_at": 1000.0 + i, "input_tokens": i, **extra}


def _ledger(n: int, start: int = 0) -> dict[str, dict[str, Any]]:
    return {f"t{i:05d}": _record(i) for i in range(start, start + n)}


def _reload(channel: LedgerChannel) -> LedgerChannel:
    """The channel as the next run sees it: its checkpoint through the saver's serializer."""
    stored = SERDE.loads_typed(SERDE.dumps_typed(channel.checkpoint()))
    return LedgerChannel(dict, channel.operator).from_checkpoint(stored)


# -- the channel alone ------------------------------------------------------------------


def test_a_small_ledger_is_checkpointed_exactly_as_a_plain_dict() -> None:
    channel = LedgerChannel(dict, merge_records)
    channel.update([_ledger(CHUNK_RECORDS - 1)])
    assert channel.checkpoint() == _ledger(CHUNK_RECORDS - 1)
    assert not is_packed(channel.checkpoint())


def test_a_long_ledger_round_trips_in_order_and_packs_small() -> None:
    channel = LedgerChannel(dict, merge_records)
    ledger = _ledger(5 * CHUNK_RECORDS + 7)
    channel.update([ledger])
    packed = channel.checkpoint()
    assert is_packed(packed) and len(packed["sealed"]) == 5 and len(packed["tail"]) == 7
    again = _reload(channel)
    assert again.get() == ledger and list(again.get()) == list(ledger)
    assert ledger_from_checkpoint(packed) == ledger
    plain_bytes = len(SERDE.dumps_typed(ledger)[1])
    packed_bytes = len(SERDE.dumps_typed(packed)[1])
    assert packed_bytes < plain_bytes / 4, (packed_bytes, plain_bytes)


def test_sealed_chunks_are_reused_by_every_later_checkpoint() -> None:
    channel = LedgerChannel(dict, merge_records)
    channel.update([_ledger(3 * CHUNK_RECORDS)])
    first = channel.checkpoint()["sealed"]
    stored = SERDE.loads_typed(SERDE.dumps_typed(channel.checkpoint()))
    channel = LedgerChannel(dict, merge_records).from_checkpoint(stored)
    channel.update([_ledger(1, start=10_000)])  # one more record: only the tail changes
    later = channel.checkpoint()
    assert later["sealed"] == first and len(later["tail"]) == 1
    assert all(a is b for a, b in zip(later["sealed"], stored["sealed"], strict=True)), "resealed, not reused"
    assert channel.checkpoint() is later, "an unchanged channel must not pack again"


def test_a_changed_record_in_a_sealed_chunk_reseals_that_chunk_only() -> None:
    channel = LedgerChannel(dict, merge_async_records)
    channel.update([_ledger(3 * CHUNK_RECORDS + 5)])
    stored = SERDE.loads_typed(SERDE.dumps_typed(channel.checkpoint()))
    before = stored["sealed"]
    channel = LedgerChannel(dict, merge_async_records).from_checkpoint(stored)
    channel.update([{"t00070": {"status": "completed", "result": "done"}}])  # chunk 1
    after = channel.checkpoint()["sealed"]
    assert after[0] is before[0] and after[2] is before[2] and after[1] != before[1]
    record = _reload(channel).get()["t00070"]
    assert record["status"] == "completed" and record["result"] == "done" and record["agent_type"] == "worker"
    assert list(_reload(channel).get()) == list(_ledger(3 * CHUNK_RECORDS + 5))


def test_parallel_writes_in_one_step_all_land_across_a_chunk_boundary() -> None:
    channel = LedgerChannel(dict, merge_records)
    channel.update([_ledger(CHUNK_RECORDS - 2)])
    channel.update([_ledger(1, start=500), _ledger(1, start=501), _ledger(1, start=502)])
    assert len(_reload(channel).get()) == CHUNK_RECORDS + 1
    assert list(_reload(channel).get())[-3:] == ["t00500", "t00501", "t00502"]


def test_writes_of_one_step_to_the_same_task_merge_in_order() -> None:
    channel = _reload_with(_ledger(CHUNK_RECORDS + 1))
    channel = LedgerChannel(dict, merge_async_records).from_checkpoint(channel.checkpoint())
    channel.update([{"t00002": {"status": "completed"}}, {"t00002": {"result": "ok"}},
                    {"t00002": {"status": "failed"}}, _ledger(1, start=800)])
    record = _reload(channel).get()["t00002"]
    assert (record["status"], record["result"], record["agent_type"]) == ("failed", "ok", "worker")
    assert list(_reload(channel).get())[-1] == "t00800"


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


def test_a_published_value_never_changes_afterwards() -> None:
    channel = LedgerChannel(dict, merge_async_records)
    channel.update([_ledger(2 * CHUNK_RECORDS)])
    seen = channel.get()
    snapshot = {k: dict(v) for k, v in seen.items()}
    channel.update([{"t00001": {"status": "failed"}}, _ledger(3, start=900)])
    channel.checkpoint()
    assert seen == snapshot
    assert channel.get()["t00001"]["status"] == "failed"


def test_a_copy_is_independent_and_checkpoints_correctly() -> None:
    channel = _reload_with(_ledger(2 * CHUNK_RECORDS + 3))
    channel.get()
    twin = channel.copy()
    twin.update([_ledger(CHUNK_RECORDS, start=700), {"t00001": {"status": "failed"}}])
    assert ledger_from_checkpoint(twin.checkpoint()) == {**_ledger(2 * CHUNK_RECORDS + 3),
                                                         **_ledger(CHUNK_RECORDS, start=700),
                                                         "t00001": {"status": "failed"}}
    other = channel.copy()
    other.update([{"t00002": {"status": "failed"}}])  # a sealed record, no new chunk
    other.checkpoint()
    channel.update([_ledger(1, start=900)])  # the original goes on as if the twins never were
    assert ledger_from_checkpoint(channel.checkpoint()) == {**_ledger(2 * CHUNK_RECORDS + 3), **_ledger(1, start=900)}


def _reload_with(ledger: dict[str, dict[str, Any]]) -> LedgerChannel:
    channel = LedgerChannel(dict, merge_records)
    channel.update([ledger])
    return _reload(channel)


def test_overwrite_replaces_the_whole_ledger_and_repacks() -> None:
    channel = _reload_with(_ledger(3 * CHUNK_RECORDS))
    channel.update([Overwrite(_ledger(2))])
    assert channel.checkpoint() == _ledger(2)
    channel = _reload_with(_ledger(3 * CHUNK_RECORDS))
    channel.update([{"__overwrite__": _ledger(CHUNK_RECORDS + 1, start=50)}])  # the JSON-crossed form
    assert _reload(channel).get() == _ledger(CHUNK_RECORDS + 1, start=50)


def test_a_plain_dict_from_an_older_checkpoint_loads_and_grows() -> None:
    old = _ledger(CHUNK_RECORDS * 2)  # how every checkpoint stored a ledger before packing
    channel = LedgerChannel(dict, merge_records).from_checkpoint(old)
    assert channel.get() == old
    channel.update([_ledger(1, start=999)])
    assert is_packed(channel.checkpoint())
    assert _reload(channel).get() == {**old, **_ledger(1, start=999)}


def test_only_what_langgraph_takes_for_an_overwrite_replaces_the_ledger() -> None:
    channel = _reload_with(_ledger(CHUNK_RECORDS + 2))
    odd = {"__overwrite__": _record(1), "type": _record(2)}  # task ids that merely look like the sentinels
    channel.update([odd])
    assert len(_reload(channel).get()) == CHUNK_RECORDS + 4


def test_a_ledger_whose_records_look_like_the_mark_is_not_mistaken_for_a_packed_one() -> None:
    hostile = {PACKED_MARK: 1, "sealed": {"x": 1}, "tail": []}
    assert not is_packed(hostile)
    assert LedgerChannel(dict, merge_records).from_checkpoint(hostile).get() == hostile


def test_a_damaged_chunk_is_an_error_naming_the_channel() -> None:
    channel = LedgerChannel(dict, merge_records)
    channel.key = "subagent_tasks"
    channel.update([_ledger(CHUNK_RECORDS + 1)])
    packed = channel.checkpoint()
    damaged = {**packed, "sealed": [[packed["sealed"][0][0], b"not zlib"]]}
    loaded = LedgerChannel(dict, merge_records).from_checkpoint(damaged)
    loaded.key = "subagent_tasks"
    with pytest.raises(ValueError, match="subagent_tasks.*sealed chunk 0"):
        loaded.get()


def test_a_channel_without_a_reducer_is_refused_with_a_clear_error() -> None:
    with pytest.raises(TypeError, match="reducer"):
        LedgerChannel(dict)


# -- in a graph, on a real checkpointer -----------------------------------------------


class _State(TypedDict):
    ledger: NotRequired[Annotated[dict[str, dict[str, Any]], LedgerChannel(dict, merge_async_records)]]
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
        raw = saver.get_tuple(config).checkpoint["channel_values"]["ledger"]
        history = list(_graph(saver).get_state_history(config))
    assert values["ledger"]["t00003"]["status"] == "completed"
    assert values["ledger"]["t00004"]["status"] == "running"
    assert is_packed(raw) and ledger_from_checkpoint(raw) == values["ledger"]
    # An older checkpoint still shows the ledger as it was then.
    assert len(history[-150].values.get("ledger", {})) < len(values["ledger"])


def test_the_deep_agent_ledger_is_packed_and_the_command_line_reads_it(tmp_path: Path) -> None:
    parent = ScriptedChatModel(rules=[("job", ["done"]), ("go", parent_script(("job", "general-purpose")))])
    path = tmp_path / "state.sqlite"
    config = {"configurable": {"thread_id": "many"}}
    with sqlite3.connect(path, check_same_thread=False) as conn:
        agent = create_deep_agent(parent, checkpointer=SqliteSaver(conn))
        for _ in range(CHUNK_RECORDS + 2):
            out = agent.invoke(user("go"), config)
        assert len(records(out)) == CHUNK_RECORDS + 2
        raw = SqliteSaver(conn).get_tuple(config).checkpoint["channel_values"]["subagent_tasks"]
        assert is_packed(raw)
        assert read_ledger(SqliteSaver(conn), "many") == out["subagent_tasks"]
        assert read_thread(SqliteSaver(conn), "many")["subagent_tasks"] == out["subagent_tasks"]


def test_in_memory_saver_keeps_the_ledger_across_runs() -> None:
    channel_graph = _graph(InMemorySaver())
    config = {"configurable": {"thread_id": "m"}}
    for n in range(2 * CHUNK_RECORDS + 1):
        channel_graph.invoke({"n": n}, config)
    assert list(channel_graph.get_state(config).values["ledger"]) == list(_ledger(2 * CHUNK_RECORDS + 1))
