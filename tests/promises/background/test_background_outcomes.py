"""Outcome stores: what a settled task leaves behind, found again by the next process, never misapplied."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from subagents.background._runtime import TABLE, MemoryOutcomes, SqliteOutcomes, outcome_for

OUTCOME = {"status": "completed", "result": "42", "owner": "local:h:1:s:r", "attempt": 1, "turns": 1}


def test_an_outcome_saved_in_the_checkpoint_file_is_read_by_a_fresh_store(tmp_path):
    db = tmp_path / "parent.db"
    sqlite3.connect(db).close()  # the checkpointer's file exists
    writer = SqliteOutcomes(str(db))
    writer.save("t1", {**OUTCOME, "approval_request": object()})  # anything odd is stored as text
    writer.close()
    reader = SqliteOutcomes(str(db))
    stored = reader.load("t1")
    assert stored["result"] == "42" and isinstance(stored["approval_request"], str)
    assert reader.load("t2") is None
    with sqlite3.connect(db) as conn:
        assert conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone() == (1,)


def test_a_missing_database_is_never_created(tmp_path):
    path = tmp_path / "nowhere" / "x.db"
    store = SqliteOutcomes(str(path))
    assert store.load("t1") is None
    with pytest.raises(sqlite3.Error):
        store.save("t1", OUTCOME)
    assert not path.exists() and not path.parent.exists()


def test_outcomes_saved_in_one_loop_step_take_the_files_lock_once(tmp_path):
    """The file is the user's checkpoint database: a thousand tasks ending together, each committing on its
    own, kept the checkpointer's connection from its lock until it gave up ("database is locked")."""
    db = tmp_path / "parent.db"
    sqlite3.connect(db).close()
    store = SqliteOutcomes(str(db))
    statements: list[str] = []
    store._connect().set_trace_callback(statements.append)

    async def settle_together() -> None:
        await asyncio.gather(*(store.save_soon({f"t{i}": {**OUTCOME, "result": str(i)}}) for i in range(1000)))

    asyncio.run(settle_together())
    assert _locked(statements) == [["BEGIN IMMEDIATE", "INSERT", "DELETE", "COMMIT"]]
    assert [store.load(f"t{i}")["result"] for i in (0, 999)] == ["0", "999"]


def test_a_thousand_leases_are_taken_and_dropped_in_a_few_statements_whatever_the_count(tmp_path):
    """A statement per row holds the lock across a wait for the interpreter between rows: on a loaded
    machine a thousand of them outlasted the checkpointer's patience as surely as a thousand commits."""
    db = tmp_path / "parent.db"
    sqlite3.connect(db).close()
    store = SqliteOutcomes(str(db))
    statements: list[str] = []
    store._connect().set_trace_callback(statements.append)
    ids = [f"t{i}" for i in range(1000)]
    store.renew("local:h:1:s:r", ids, 100.0)
    assert store.lease("t999") == ("local:h:1:s:r", 100.0)
    store.save_all({task_id: OUTCOME for task_id in ids[:500]})
    assert _locked(statements) == [["BEGIN IMMEDIATE", "INSERT", "COMMIT"],
                                   ["BEGIN IMMEDIATE", "INSERT", "DELETE", "COMMIT"]]
    assert store.lease("t0") is None and store.lease("t500") == ("local:h:1:s:r", 100.0)


def _locked(statements: list[str]) -> list[list[str]]:
    """Each write transaction in ``statements``, as the first word of each statement in it."""
    out: list[list[str]] = []
    for sql in statements:
        word = sql.split()[0] if sql.split()[0] != "BEGIN" else sql
        if word == "BEGIN IMMEDIATE":
            out.append([])
        if out and (out[-1][-1:] != ["COMMIT"]) and word in ("BEGIN IMMEDIATE", "INSERT", "DELETE", "COMMIT"):
            out[-1].append(word)
    return out


def test_every_save_of_a_group_that_cannot_be_written_fails(tmp_path):
    store = SqliteOutcomes(str(tmp_path / "nowhere" / "x.db"))

    async def settle_together() -> list[BaseException | None]:
        return await asyncio.gather(*(store.save_soon({f"t{i}": OUTCOME}) for i in range(3)),
                                    return_exceptions=True)

    assert [type(e) for e in asyncio.run(settle_together())] == [sqlite3.OperationalError] * 3


@pytest.mark.parametrize("other", [{"attempt": 2}, {"turns": 2}, {"owner": "local:h:2:s:r"}])
def test_an_outcome_of_another_attempt_turn_or_owner_is_not_applied(other):
    assert outcome_for({**OUTCOME, "status": "running"}, OUTCOME)["result"] == "42"
    assert outcome_for({**OUTCOME, **other, "status": "running"}, OUTCOME) == {}
    assert outcome_for(OUTCOME, None) == {}


def test_memory_outcomes_are_bounded_by_bytes_and_the_oldest_keep_how_they_ended():
    store = MemoryOutcomes(max_bytes=3_000)
    for i in range(4):
        store.save(f"t{i}", {**OUTCOME, "result": "x" * 1_000})
    assert store.bytes <= 3_000
    assert [store.load(f"t{i}")["result"] == "x" * 1_000 for i in range(4)] == [False, False, True, True]
    for i in range(2):  # not lost: still completed, the result saying it was dropped from memory
        old = store.load(f"t{i}")
        assert old["status"] == "completed" and old["owner"] == OUTCOME["owner"]
        assert old["result"].startswith("[cut: this result was dropped from memory")


def test_an_outcome_larger_than_memory_keeps_the_start_of_its_result_and_says_so():
    store = MemoryOutcomes(max_bytes=80_000)
    store.save("big", {**OUTCOME, "result": "y" * 100_000})
    kept = store.load("big")
    assert kept["status"] == "completed" and kept["result"].startswith("y" * 1_000)
    assert "[cut: the result was 100,000 characters" in kept["result"] and store.bytes <= 80_000


def test_memory_outcomes_count_the_bytes_text_holds_not_its_characters():
    """An emoji is 4 bytes in memory: 8 results just under the cut in characters held 4x the cap."""
    store = MemoryOutcomes(max_bytes=1_000_000)
    for i in range(8):
        store.save(f"t{i}", {"status": "completed", "result": "\U0001F600" * 120_000})
    assert store.bytes <= 1_000_000
    kept = [store.load(f"t{i}")["result"] for i in range(8)]
    assert all("[cut:" in text for text in kept)  # each over an eighth of the cap in bytes: cut to its start
    assert sum(4 * len(text) for text in kept) <= 1_100_000
