"""The CLI's Postgres state store: ``--db postgresql://...``.

Opens LangGraph's ``PostgresSaver`` (reading back) or ``AsyncPostgresSaver``
(a run), creates the tables on first use, and turns every failure into one
line that names the database without its password.

Example::

    async with open_async_postgres("postgresql://me@127.0.0.1:5432/agents") as saver:
        ...
    with open_postgres("postgresql://me:pw@db/agents") as saver:   # errors show me@db:5432/agents
        ...
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

INSTALL_HINT = 'pip install "governed-subagents[postgres]" (langgraph-checkpoint-postgres and psycopg)'


class DatabaseError(RuntimeError):
    """The ``--db`` database cannot be used; the message names it (never its password) and says why."""

    def __init__(self, db_url: str, reason: str) -> None:
        self.target = describe_url(db_url)
        self.reason = reason
        super().__init__(f"--db {self.target}: {reason}")


def describe_url(db_url: str) -> str:
    """``user@host:port/db`` from a database URL, leaving out any password."""
    try:
        parts = urlsplit(db_url)
        host = parts.hostname or "localhost"
        port = parts.port or 5432
    except ValueError:
        return "(unparseable URL)"
    user = f"{parts.username}@" if parts.username else ""
    return f"{parts.scheme}://{user}{host}:{port}{parts.path}"


def _one_line(exc: BaseException) -> str:
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__


def _saver_class(db_url: str, *, aio: bool) -> Any:
    if not db_url.startswith(("postgresql://", "postgres://")):
        raise DatabaseError(db_url, "expected a postgresql:// URL")
    try:
        if aio:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

            return AsyncPostgresSaver
        from langgraph.checkpoint.postgres import PostgresSaver

        return PostgresSaver
    except ImportError as exc:
        raise DatabaseError(db_url, f"Postgres support is not installed ({_one_line(exc)}): {INSTALL_HINT}") from None


def _connection_error(db_url: str, exc: Exception) -> DatabaseError:
    return DatabaseError(db_url, f"cannot use the database: {_one_line(exc).replace(db_url, describe_url(db_url))}")


@contextlib.contextmanager
def open_postgres(db_url: str) -> Iterator[Any]:
    """A ``PostgresSaver`` on ``db_url`` with its tables in place."""
    saver_class = _saver_class(db_url, aio=False)
    import psycopg

    with contextlib.ExitStack() as stack:
        try:
            saver = stack.enter_context(saver_class.from_conn_string(db_url))
            saver.setup()
        except psycopg.Error as exc:
            raise _connection_error(db_url, exc) from None
        yield saver


@contextlib.asynccontextmanager
async def open_async_postgres(db_url: str) -> AsyncIterator[Any]:
    """An ``AsyncPostgresSaver`` on ``db_url`` with its tables in place."""
    saver_class = _saver_class(db_url, aio=True)
    import psycopg

    async with contextlib.AsyncExitStack() as stack:
        try:
            saver = await stack.enter_async_context(saver_class.from_conn_string(db_url))
            await saver.setup()
        except psycopg.Error as exc:
            raise _connection_error(db_url, exc) from None
        yield saver
