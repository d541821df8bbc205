"""Where the CLI keeps threads, ledgers and transcripts between runs.

The embedded default is SQLite in a project-local state directory
(``.deep_agent/`` under the current directory, or ``--state-dir``):
``state.sqlite`` holds the checkpoints (so threads, ledgers and the
children's own checkpoints survive), ``sessions/`` the JSONL transcripts,
and ``last_thread`` the thread the last ``run`` used. A ``postgresql://``
database URL selects Postgres instead (``deep_agent._postgres_store``;
``pip install "governed-subagents[postgres]"``).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from middleware import ASYNC_LEDGER_KEY, LEDGER_KEY
from subagents import ledger_from_checkpoint

DEFAULT_STATE_DIR = ".deep_agent"


def resolve_state_dir(path: str | Path | None, *, create: bool = True) -> Path:
    """The state folder as an absolute path (so stored transcript paths work from anywhere).

    With ``create`` it is made if missing and checked writable; an
    unwritable one is a :class:`~deep_agent._cli_errors.UsageError` in one
    line. Readers pass ``create=False`` and leave no folder behind.
    """
    from deep_agent._cli_errors import UsageError

    state = (Path(path).expanduser() if path else Path.cwd() / DEFAULT_STATE_DIR).absolute()
    if not create:
        return state
    flag = "--state-dir" if path else "state directory"
    try:
        state.mkdir(parents=True, exist_ok=True)
        probe = state / f".write-check-{os.getpid()}"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"{flag} {state}: cannot write there ({exc.strerror or exc})") from None
    return state


def sessions_dir(state: Path) -> Path:
    return state / "sessions"


MAX_DB_THREAD_ID_BYTES = 1024
"""The longest thread id (UTF-8 bytes) a run keeps in Postgres: its checkpoint tables index the
thread id with the namespace and version, and a btree entry holds at most 2,704 bytes."""


def check_thread_id(thread_id: str, db_url: str | None = None) -> str:
    """``thread_id``, if it can be stored as it is; else a one-line error naming ``--thread``.

    An argument that is not valid UTF-8 arrives with stand-in characters
    that no file or database can hold, so it is refused before the run; so
    is, with a ``--db`` database, an id longer than its indexes hold
    (:data:`MAX_DB_THREAD_ID_BYTES`) or one with a NUL character.
    """
    from deep_agent._cli_errors import UsageError

    try:
        size = len(thread_id.encode("utf-8"))
    except UnicodeEncodeError:
        raise UsageError(f"--thread {thread_id!r}: a thread id must be valid UTF-8 text") from None
    if db_url and (size > MAX_DB_THREAD_ID_BYTES or "\x00" in thread_id):
        shown = repr(thread_id[:40]) + ("..." if len(thread_id) > 40 else "")
        raise UsageError(f"--thread {shown}: a thread id kept in a --db database must be at most "
                         f"{MAX_DB_THREAD_ID_BYTES:,} bytes of UTF-8 with no NUL character (this one is "
                         f"{size:,} bytes): Postgres text holds no NUL, and its checkpoint indexes no more")
    return thread_id


def remember_thread(state: Path, thread_id: str) -> None:
    """Keep ``thread_id`` as the last thread, byte for byte (read back by :func:`last_thread`)."""
    data = check_thread_id(thread_id).encode("utf-8")  # before the old marker is truncated
    (state / "last_thread").write_bytes(data)


def last_thread(state: Path) -> str | None:
    """The thread the last ``run`` here used, exactly as given (spaces included), or ``None``."""
    marker = state / "last_thread"
    if not marker.exists():
        return None
    # Bytes, not text: reading text would turn a "\r" in the id into "\n".
    try:
        return marker.read_bytes().decode("utf-8") or None
    except UnicodeDecodeError:
        raise LookupError(f"{marker} does not hold a thread id: name one (deep-agent tasks THREAD)") from None


@contextlib.asynccontextmanager
async def open_async_checkpointer(state: Path, db_url: str | None = None) -> AsyncIterator[Any]:
    """The checkpointer a ``run`` writes through."""
    if db_url:
        saver_cm = _postgres(db_url, aio=True)
    else:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        saver_cm = AsyncSqliteSaver.from_conn_string(str(state / "state.sqlite"))
    async with saver_cm as saver:
        yield saver


@contextlib.contextmanager
def open_checkpointer(state: Path, db_url: str | None = None) -> Iterator[Any]:
    """A sync checkpointer for reading ledgers and transcripts back."""
    if db_url:
        with _postgres(db_url, aio=False) as saver:
            yield saver
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = state / "state.sqlite"
    if not path.exists():
        raise FileNotFoundError(f"no state at {path}: run `deep-agent run` (or `demo`) first")
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


def _postgres(db_url: str, *, aio: bool) -> Any:
    from deep_agent._postgres_store import open_async_postgres, open_postgres

    return open_async_postgres(db_url) if aio else open_postgres(db_url)


def read_thread(saver: Any, thread_id: str) -> dict[str, Any]:
    """A thread's values (ledgers, messages), read from its latest checkpoint.

    The ledgers come back as plain dicts, however the checkpoint packed them.
    """
    saved = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    if saved is None:
        raise LookupError(f"no thread {thread_id!r} in the state store")
    values = dict(saved.checkpoint["channel_values"])
    for key in (LEDGER_KEY, ASYNC_LEDGER_KEY):
        if key in values:
            values[key] = ledger_from_checkpoint(values[key])
    return values


def read_ledger(saver: Any, thread_id: str) -> dict[str, dict[str, Any]]:
    """A thread's ledger of synchronous tasks, read from its latest checkpoint."""
    return read_thread(saver, thread_id).get(LEDGER_KEY) or {}


def find_task(saver: Any, task_id: str, thread_id: str | None = None) -> tuple[str, Any]:
    """The thread and row (:class:`deep_agent._thread_tasks.TaskRow`) of a task id; a unique prefix is enough."""
    from deep_agent._thread_tasks import task_rows

    threads = [thread_id] if thread_id else _threads(saver)
    matches = []
    for thread in threads:
        for row in task_rows(read_thread(saver, thread)):
            if row.id.startswith(task_id):
                matches.append((thread, row))
    if not matches:
        raise LookupError(f"no task {task_id!r} in {'thread ' + repr(thread_id) if thread_id else 'any thread'}")
    if len(matches) > 1:
        raise LookupError(f"task id prefix {task_id!r} is ambiguous: give more characters")
    return matches[0]


def _threads(saver: Any) -> list[str]:
    seen: dict[str, None] = {}
    for saved in saver.list(None):
        if not saved.config["configurable"].get("checkpoint_ns"):
            seen.setdefault(saved.config["configurable"]["thread_id"], None)
    return list(seen)
