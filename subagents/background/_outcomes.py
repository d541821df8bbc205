"""Where a local background task's outcome is kept the moment it settles, so a restart loses nothing.

The parent's ledger learns how a task ended only at the parent's next turn.
A task that finishes between two turns and whose process then dies would be
gone with it; so the runtime writes each outcome (status, result or error,
usage, timings) as soon as the task settles:

* **beside the thread's checkpoints** when the parent's checkpointer is a
  SQLite file (``SqliteSaver``/``AsyncSqliteSaver``): a small table
  ``background_task_outcomes`` in the same file. The record's
  ``outcome_db`` names the file, so any later process reading the thread
  finds the outcome there and reports the task ``completed`` (or ``error``)
  with its result, instead of ``lost``;
* otherwise **in the runtime's memory** (bounded by bytes), which another
  graph of the same process finds through the task's owner.

An outcome applies to a record only if it belongs to the same owner,
attempt and turn, so an old attempt's outcome never overwrites a newer one.

The SQLite store also keeps a **lease** per live task (table
``background_task_leases``): the owning runtime renews it every
:data:`LEASE_RENEW_S` while the task lives. A process that cannot check the
owner's pid (it runs on another host, or in another container) treats a
lease older than :data:`LEASE_S` as proof that the owner is gone.

Example::

    store = SqliteOutcomes("/data/agent.db")
    store.save("t1", {"status": "completed", "result": "42", "owner": o, "attempt": 1, "turns": 1})
    store.load("t1")["result"]    # '42', in this process or the next one
"""

from __future__ import annotations

import collections
import json
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Mapping
from typing import Any, Protocol

TABLE = "background_task_outcomes"
LEASE_TABLE = "background_task_leases"
LEASE_RENEW_S = 10.0
"""How often a runtime renews the leases of its live tasks."""
LEASE_S = 60.0
"""How old a lease may be before its owner counts as gone (six missed renewals)."""
MEMORY_MAX_BYTES = 16 * 1024 * 1024
"""How much outcome text one runtime keeps in memory (oldest dropped first)."""

_MATCH_KEYS = ("owner", "attempt", "turns")


class OutcomeStore(Protocol):
    """Keeps the settled fields of a task by id."""

    def save(self, task_id: str, fields: Mapping[str, Any]) -> None: ...
    def load(self, task_id: str) -> dict[str, Any] | None: ...


def outcome_for(record: Mapping[str, Any], outcome: Mapping[str, Any] | None) -> dict[str, Any]:
    """The stored fields that bring ``record`` up to date (empty if the outcome is of another run)."""
    if not outcome:
        return {}
    if any(outcome.get(k) != record.get(k) for k in _MATCH_KEYS if k in outcome):
        return {}
    return dict(outcome)


class MemoryOutcomes:
    """Outcomes in this process's memory, at most ``max_bytes`` of them; none is ever dropped whole.

    The parent may not have read an outcome yet (it learns it at its next
    turn), so losing one would report a finished task ``lost``. Instead an
    outcome larger than an eighth of ``max_bytes`` keeps only the start of its
    result, and once the outcomes hold more than ``max_bytes`` the oldest
    keep their status, error and usage but not their result; either way the
    result says what was cut. Only beyond :data:`MEMORY_MAX_STUBS` such cut
    outcomes are the oldest dropped.
    """

    def __init__(self, max_bytes: int = MEMORY_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: collections.OrderedDict[str, tuple[dict[str, Any], int]] = collections.OrderedDict()
        self._stubs: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()

    def save(self, task_id: str, fields: Mapping[str, Any]) -> None:
        kept = _cut_result(dict(fields), max(self.max_bytes // 8, 4096))
        size = _size(kept)
        old = self._items.pop(task_id, None)
        self._stubs.pop(task_id, None)
        if old is not None:
            self.bytes -= old[1]
        self._items[task_id] = (kept, size)
        self.bytes += size
        while self.bytes > self.max_bytes and self._items:
            oldest, (old_fields, dropped) = self._items.popitem(last=False)
            self.bytes -= dropped
            self._stubs[oldest] = _stub(old_fields, self.max_bytes)
        while len(self._stubs) > MEMORY_MAX_STUBS:
            self._stubs.popitem(last=False)

    def load(self, task_id: str) -> dict[str, Any] | None:
        item = self._items.get(task_id)
        if item is not None:
            return dict(item[0])
        stub = self._stubs.get(task_id)
        return dict(stub) if stub is not None else None


MEMORY_MAX_STUBS = 10_000
"""How many outcomes cut to their status (no result) one runtime keeps in memory."""


def _cut_result(fields: dict[str, Any], limit: int) -> dict[str, Any]:
    """``fields`` with a result too large for ``limit`` cut to its start, and a note saying so."""
    result = fields.get("result")
    if not isinstance(result, str) or _size(fields) <= limit:
        return fields
    width = _char_bytes(result)
    room = max(0, (limit - (_size(fields) - len(result) * width) - 400) // width)
    fields["result"] = result[:room] + (
        f"\n[cut: the result was {len(result):,} characters; this process keeps the first {room:,} in "
        "memory (its parent's checkpointer is not a SQLite file, where it would be kept whole)]")
    return fields


def _stub(fields: Mapping[str, Any], max_bytes: int) -> dict[str, Any]:
    """An outcome reduced to what says how the task ended: no result text, a short error."""
    stub = {k: v for k, v in fields.items() if not isinstance(v, str) or len(v) <= 512}
    if isinstance(fields.get("error"), str):
        stub["error"] = fields["error"][:512]
    if fields.get("result") is not None:
        stub["result"] = (f"[cut: this result was dropped from memory, where this process keeps at most "
                          f"{max_bytes:,} bytes of results (its parent's checkpointer is not a SQLite file)]")
    return stub


class SqliteOutcomes:
    """Outcomes in a table of a SQLite file (the parent's checkpoint database)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._table_ready = False

    def save(self, task_id: str, fields: Mapping[str, Any]) -> None:
        data = json.dumps(dict(fields), default=str)
        with self._lock:
            conn = self._ready()
            conn.execute(f"INSERT OR REPLACE INTO {TABLE} (task_id, fields) VALUES (?, ?)", (task_id, data))
            # A settled task needs no lease any more (a follow-up takes a new one).
            conn.execute(f"DELETE FROM {LEASE_TABLE} WHERE task_id = ? AND owner = ?",
                         (task_id, str(fields.get("owner"))))

    def renew(self, owner: str, task_ids: list[str], at: float) -> None:
        """Renew ``owner``'s leases on ``task_ids`` (its live tasks) as of ``at``."""
        with self._lock:
            self._ready().executemany(
                f"INSERT OR REPLACE INTO {LEASE_TABLE} (task_id, owner, renewed_at) VALUES (?, ?, ?)",
                [(task_id, owner, at) for task_id in task_ids],
            )

    def lease(self, task_id: str) -> tuple[str, float] | None:
        """The task's lease: its owner and when it was last renewed (``None``: no lease)."""
        with self._lock:
            try:
                row = self._connect().execute(
                    f"SELECT owner, renewed_at FROM {LEASE_TABLE} WHERE task_id = ?", (task_id,)
                ).fetchone()
            except sqlite3.Error:
                return None
        return (str(row[0]), float(row[1])) if row else None

    def load(self, task_id: str) -> dict[str, Any] | None:
        with self._lock:
            try:
                row = self._connect().execute(
                    f"SELECT fields FROM {TABLE} WHERE task_id = ?", (task_id,)
                ).fetchone()
            except sqlite3.Error:  # no file, or no table yet: nothing stored
                return None
        if row is None:
            return None
        try:
            value = json.loads(row[0])
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _ready(self) -> sqlite3.Connection:
        conn = self._connect()
        if not self._table_ready:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (task_id TEXT PRIMARY KEY, fields TEXT NOT NULL)")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {LEASE_TABLE} "
                         "(task_id TEXT PRIMARY KEY, owner TEXT NOT NULL, renewed_at REAL NOT NULL)")
            self._table_ready = True
        return conn

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            # Only an existing database (the checkpointer's) is opened: a path read from a
            # record never makes a new file appear. Autocommit: each outcome is on disk when
            # save returns.
            uri = "file:" + urllib.parse.quote(self.path) + "?mode=rw"
            self._conn = sqlite3.connect(uri, uri=True, timeout=10, check_same_thread=False,
                                         isolation_level=None)
        return self._conn


class OutcomeStores:
    """A runtime's outcome stores: its memory, and each SQLite file it has written to or read from."""

    def __init__(self) -> None:
        self.memory = MemoryOutcomes()
        self._files: dict[str, SqliteOutcomes] = {}

    def for_db(self, path: str | None) -> OutcomeStore:
        """The store for a record whose ``outcome_db`` is ``path`` (memory when ``None``)."""
        return self.file(path) if path else self.memory

    def file(self, path: str) -> SqliteOutcomes:
        """The store of one SQLite file (opened once per runtime)."""
        store = self._files.get(path)
        if store is None:
            store = self._files[path] = SqliteOutcomes(path)
        return store

    def close(self) -> None:
        for store in self._files.values():
            store.close()
        self._files.clear()


async def checkpoint_db(config: Mapping[str, Any]) -> str | None:
    """The SQLite file the run's checkpointer writes to, if it is one (``None`` otherwise).

    LangGraph offers no public accessor for a run's checkpointer yet; this
    reads the same config key the runner does, in this one place.
    """
    saver = (config.get("configurable") or {}).get("__pregel_checkpointer")
    conn = getattr(saver, "conn", None)
    try:
        if isinstance(conn, sqlite3.Connection):
            lock = getattr(saver, "lock", None) or threading.Lock()
            with lock:
                rows = conn.execute("PRAGMA database_list").fetchall()
        elif conn is not None and type(conn).__module__.startswith("aiosqlite"):
            async with conn.execute("PRAGMA database_list") as cursor:
                rows = await cursor.fetchall()
        else:
            return None
    except Exception:  # noqa: BLE001 - a checkpointer we cannot ask keeps outcomes in memory
        return None
    for _seq, name, path in rows:
        if name == "main" and path:
            return os.path.abspath(path)
    return None


def _size(fields: Mapping[str, Any]) -> int:
    """Bytes the fields' text holds in memory (a str keeps 1, 2 or 4 bytes a character), plus a fixed part."""
    return 256 + sum(len(v) * _char_bytes(v) for v in fields.values() if isinstance(v, str))


def _char_bytes(text: str) -> int:
    if not text or text.isascii():
        return 1
    widest = ord(max(text))
    return 1 if widest < 0x100 else 2 if widest < 0x10000 else 4
