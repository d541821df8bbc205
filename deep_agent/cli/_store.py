"""Where the CLI keeps threads, ledgers and transcripts between runs. The state folder (``.deep_agent/`` or
``--state-dir``) holds ``state.sqlite`` (the checkpoints), ``sessions/`` (JSONL transcripts) and ``last_thread``. A
``postgresql://`` ``--db`` URL keeps the checkpoints in Postgres instead."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import importlib
import os
import sqlite3
import tempfile
import time
from collections.abc import AsyncIterator, Generator, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import quote, urlsplit

from deep_agent._factory import saved_messages
from deep_agent.cli._errors import UsageError, with_hint
from middleware import ASYNC_LEDGER_KEY, LEDGER_KEY
from subagents._errors import SubagentsError, UnknownTask
from subagents._ledger import DataOnlySerializer, LedgerChannel, merge_async_records, merge_records, saved_value
from subagents._plans import adrive, drive

INSTALL_HINT = 'pip install "governed-subagents[postgres]" (langgraph-checkpoint-postgres and psycopg)'


class DatabaseError(SubagentsError, RuntimeError):
    """The ``--db`` database cannot be used; the message names it (never its password) and says why."""

    def __init__(self, db_url: str, reason: str) -> None:
        super().__init__(f"--db {describe_url(db_url)}: {reason}")


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


DEFAULT_STATE_DIR = ".deep_agent"

GITIGNORE = "# Created by deep-agent: this folder is the CLI's state, not part of the project.\n*\n"


def resolve_state_dir(path: str | Path | None, *, create: bool = True) -> Path:
    """The state folder as an absolute path (stored transcript paths work from anywhere); with ``create``, made
    (with a ``.gitignore`` of ``*``) and checked writable. A symlinked default is refused: the checkout would pick."""
    state = (Path(path).expanduser() if path else Path.cwd() / DEFAULT_STATE_DIR).absolute()
    flag = "--state-dir" if path else "state directory"
    if not path and state.is_symlink():
        raise UsageError(f"{flag} {state}: is a symlink; the state folder is data and is never reached through "
                         "one: remove it, or name the folder with --state-dir")
    if not create:
        return state
    try:
        with contextlib.suppress(FileExistsError):
            state.mkdir(parents=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC  # new, never a symlink
            with os.fdopen(os.open(state / ".gitignore", flags, 0o644), "w", encoding="utf-8") as handle:
                handle.write(GITIGNORE)
        # mkstemp creates a new name (O_EXCL): a planted symlink is never followed, its target never truncated.
        fd, probe = tempfile.mkstemp(prefix=".write-check-", dir=state)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UsageError(f"{flag} {state}: cannot write there ({exc.strerror or exc})") from None
    return state


def sessions_dir(state: Path) -> Path:
    """Where a run's JSONL transcripts go: ``sessions/`` of the state folder, refused if it is a symlink."""
    sessions = state / "sessions"
    if sessions.is_symlink():
        raise StateFileError(sessions, "is a symlink; the state folder is data and no symlink in it is followed")
    return sessions


# The state folder is data (a checkout can hold its own, and its records name transcript files): a file
# is read only inside it, reached one name at a time with O_NOFOLLOW, regular (a pipe would block), and
# at most MAX_STATE_FILE_BYTES; SQLite's files are checked the same way before SQLite opens them.

MAX_STATE_FILE_BYTES = 256 * 1024 * 1024


class StateFileError(SubagentsError, LookupError):
    """A file of the state folder that is not read: outside it, behind a symlink, not a regular file, or too big."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"{path}: {reason}")


def state_file(state: Path, path: str | os.PathLike[str]) -> Any:
    """``path`` (inside ``state``, absolute or relative to it) opened to read as a binary file, else
    :class:`StateFileError` (or ``FileNotFoundError`` when it is not there)."""
    from deep_agent.tools._workspace import ChangedWhileOpening, NotRegularFile, Workspace, open_regular

    root = state.absolute()
    target = Path(path) if Path(path).is_absolute() else root / path
    if not root.exists():
        raise FileNotFoundError(errno.ENOENT, "no state folder", str(root))
    names = target.relative_to(root).parts if target.is_relative_to(root) else ()
    if not names or ".." in names:
        raise StateFileError(target, f"lies outside the state folder {root}; only its own files are read")
    try:
        ws = Workspace(root)
        return open_regular(ws.root.joinpath(*names), within=ws)
    except ChangedWhileOpening:
        raise StateFileError(target, "a symlink stands on its path; the state folder is data and no symlink "
                                     "in it is followed") from None
    except NotRegularFile:
        raise StateFileError(target, "not a regular file (a pipe, socket or device is never read)") from None
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StateFileError(target, f"cannot be read ({exc.strerror or exc})") from None


def read_state_file(state: Path, path: str | os.PathLike[str], *, max_bytes: int = MAX_STATE_FILE_BYTES) -> bytes:
    """The bytes of a file of the state folder (see :func:`state_file`), at most ``max_bytes`` of them."""
    with state_file(state, path) as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise StateFileError(path, f"holds more than {max_bytes:,} bytes, more than the CLI reads back")
    return cast("bytes", data)


# Postgres indexes the thread id with the namespace and version; a btree entry holds at most 2,704 bytes.
MAX_DB_THREAD_ID_BYTES = 1024


def check_thread_id(thread_id: str, db_url: str | None = None) -> str:
    """``thread_id``, if it can be stored as it is (valid UTF-8; for ``--db``, short and NUL-free)."""
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
    from deep_agent.tools._workspace import Workspace, open_regular

    data = check_thread_id(thread_id).encode("utf-8")  # before the old marker is truncated
    ws = Workspace(state)
    try:  # written as it is read: never through a symlink, never into a pipe
        with open_regular(ws.root / "last_thread", "wb", within=ws) as handle:
            handle.write(data)
    except OSError as exc:
        raise StateFileError(state / "last_thread", f"cannot be written ({exc.strerror or exc})") from None


def last_thread(state: Path) -> str | None:
    """The thread the last ``run`` here used, exactly as given (spaces included), or ``None``."""
    marker = state / "last_thread"
    # Bytes, not text: reading text would turn a "\r" in the id into "\n".
    try:
        return read_state_file(state, marker).decode("utf-8") or None
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise UnknownTask(f"{marker} does not hold a thread id: name one (deep-agent tasks THREAD)") from None


def _opening(state: Path, db_url: str | None, *, aio: bool) -> Generator[Any, Any, Any]:
    """Opening the checkpointer, as steps (a context to enter, else a call) a sync or an async driver takes."""
    if db_url:
        if not db_url.startswith(("postgresql://", "postgres://")):
            raise DatabaseError(db_url, "expected a postgresql:// URL")
        try:
            import psycopg

            module = importlib.import_module("langgraph.checkpoint.postgres" + (".aio" if aio else ""))
            saver_class = getattr(module, "AsyncPostgresSaver" if aio else "PostgresSaver")
        except ImportError as exc:
            raise DatabaseError(db_url, f"Postgres support is not installed ({_one_line(exc)}): "
                                        f"{INSTALL_HINT}") from None
        try:
            saver = yield saver_class.from_conn_string(db_url)
            yield saver.setup  # its tables in place
        except psycopg.Error as exc:
            shown = _one_line(exc).replace(db_url, describe_url(db_url))
            raise DatabaseError(db_url, f"cannot use the database: {shown}") from None
        saver.serde = DataOnlySerializer(describe_url(db_url))
        return saver
    path = state / "state.sqlite"  # it and its journals regular files (or missing), no symlink
    for file in (path, *(path.with_name(f"{path.name}{suffix}") for suffix in ("-wal", "-shm", "-journal"))):
        try:
            state_file(state, file).close()
        except FileNotFoundError:
            if not aio and file == path:  # a run (async) makes it; reading back needs it
                raise FileNotFoundError(f"no state at {path}: run `deep-agent run` (or `demo`) first") from None
    uri = f"file:{quote(str(path))}?nofollow=1"  # SQLite refuses a symlink there (checked just before, too)
    if aio:
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver as saver_class

        conn = yield aiosqlite.connect(uri, uri=True)
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver as saver_class

        conn = yield contextlib.closing(sqlite3.connect(uri, uri=True, check_same_thread=False))
    # The folder may be a stranger's checkout: its state is read as data, never as code.
    return saver_class(conn, serde=DataOnlySerializer(str(path)))


@contextlib.asynccontextmanager
async def open_async_checkpointer(state: Path, db_url: str | None = None) -> AsyncIterator[Any]:
    """The checkpointer a ``run`` writes through."""
    async with contextlib.AsyncExitStack() as stack:
        async def take(step: Any) -> Any:
            return await (stack.enter_async_context(step) if hasattr(step, "__aenter__") else step())

        yield await adrive(_opening(state, db_url, aio=True), take)


@contextlib.contextmanager
def open_checkpointer(state: Path, db_url: str | None = None) -> Iterator[Any]:
    """A sync checkpointer for reading ledgers and transcripts back."""
    with contextlib.ExitStack() as stack:
        yield drive(_opening(state, db_url, aio=False),
                    lambda step: stack.enter_context(step) if hasattr(step, "__enter__") else step())


def read_thread(saver: Any, thread_id: str) -> dict[str, Any]:
    """A thread's values (ledgers as plain dicts, messages), read from its latest checkpoint."""
    saved = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    if saved is None:
        raise UnknownTask(f"no thread {thread_id!r} in the state store")
    values = dict(saved.checkpoint["channel_values"])
    values["messages"] = saved_messages(saver, saved)
    for key, merge in ((LEDGER_KEY, merge_records), (ASYNC_LEDGER_KEY, merge_async_records)):
        if (ledger := saved_value(saver, saved, key, LedgerChannel(dict, merge))) is not None:
            values[key] = ledger
    return values


def find_task(saver: Any, task_id: str, thread_id: str | None = None) -> tuple[str, Any]:
    """The thread and :class:`TaskRow` of a task id; a unique prefix is enough."""
    threads = [thread_id] if thread_id else dict.fromkeys(  # every thread's root namespace, in order
        c["thread_id"] for c in (s.config["configurable"] for s in saver.list(None)) if not c.get("checkpoint_ns"))
    matches = [(thread, row) for thread in threads
               for row in task_rows(read_thread(saver, thread)) if row.id.startswith(task_id)]
    if not matches:
        raise UnknownTask(f"no task {task_id!r} in {'thread ' + repr(thread_id) if thread_id else 'any thread'}")
    if len(matches) > 1:
        raise UnknownTask(f"task id prefix {task_id!r} is ambiguous: give more characters")
    return matches[0]


# Every view (live tree, ``tasks``, ``transcript``) reads a thread's tasks through :func:`task_rows`, so
# none misses a kind: delegations, background tasks, and delegation calls refused before any ledger.

DELEGATION_TOOLS = frozenset({"task", "start_async_task"})

TaskKind = Literal["task", "background", "refused"]
REFUSED_STOP_REASONS = frozenset({"refused", "invalid_call"})  # never ran a child


@dataclasses.dataclass
class TaskRow:
    """One task as the command line shows it."""

    id: str
    kind: TaskKind
    agent_type: str
    status: str
    description: str = ""
    tool_call_id: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    duration_s: float | None = None  # work time: without the time spent waiting for approval
    waiting_s: float = 0.0  # time spent waiting for approval, up to the last pause's end
    paused_since: float | None = None  # when the pause going on now began (a task waiting for approval)
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    result: str | None = None
    error: str | None = None
    runner: str | None = None
    attempt: int | None = None
    transcript: str | None = None
    cut_short: str | None = None  # the limit (stop reason) that cut it short: its result is a partial wrap-up

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def shown_status(self) -> str:
        """The status as the views print it: a completed task a limit cut short says so, and which limit."""
        return f"cut short ({self.cut_short})" if self.cut_short and self.status == "completed" else self.status

    @property
    def outcome(self) -> str:
        return (self.result if self.status == "completed" else self.error) or ""

    def seconds(self, now: float | None = None) -> float:
        """Its work time, or for a task still going, the time since it started less its waiting."""
        if self.duration_s is not None or self.started_at is None:
            return self.duration_s or 0.0
        end = self.finished_at or (now if now is not None else time.time())
        return max(0.0, end - self.started_at - self.waiting(now))

    def waiting(self, now: float | None = None) -> float:
        """The time it has spent waiting for approval, the pause going on now included."""
        paused = 0.0 if self.paused_since is None else (now if now is not None else time.time()) - self.paused_since
        return self.waiting_s + max(0.0, paused)

    def timing(self, now: float | None = None) -> str:
        """``2.1s``, or ``2.1s + 4.0s waiting`` for a task that waited for approval."""
        return seconds_text(self.seconds(now), self.waiting(now))


def seconds_text(work: float, waiting: float) -> str:
    """Work time, and waiting time apart when there was any: ``2.1s + 4.0s waiting``."""
    return f"{work:.1f}s" + (f" + {waiting:.1f}s waiting" if waiting >= 0.05 else "")


def sync_row(record: Mapping[str, Any]) -> TaskRow:
    # "none:" is the transcript of a delegation refused before any child ran.
    refused = record.get("stop_reason") in REFUSED_STOP_REASONS or record.get("transcript") == "none:" or (
        record.get("status") == "error" and not record.get("transcript") and not record.get("model_calls"))
    duration = record.get("duration_ms")
    return TaskRow(kind="refused" if refused else "task", status=str(record.get("status") or "running"),
                   started_at=record.get("started_at"), finished_at=record.get("finished_at"),
                   duration_s=None if duration is None else duration / 1000,
                   waiting_s=float(record.get("waiting_ms") or 0.0) / 1000, **_row_fields(record))


def background_row(record: Mapping[str, Any]) -> TaskRow:
    started = record.get("started_at") or record.get("created_at")
    finished = record.get("finished_at")
    return TaskRow(kind="background", status=str(record.get("status") or "pending"), started_at=started,
                   finished_at=finished, duration_s=(finished - started) if finished and started else None,
                   runner=record.get("runner"), attempt=record.get("attempt"), **_row_fields(record))


def _row_fields(record: Mapping[str, Any]) -> dict[str, Any]:
    """The fields a delegation's record and a background task's share."""
    return dict(id=str(record["id"]), agent_type=str(record.get("agent_type") or "?"),
                description=record.get("description") or "", tool_call_id=record.get("tool_call_id"),
                model_calls=int(record.get("model_calls") or 0), input_tokens=int(record.get("input_tokens") or 0),
                output_tokens=int(record.get("output_tokens") or 0), cost_usd=float(record.get("cost_usd") or 0.0),
                result=record.get("result"), error=with_hint(record.get("error")),
                transcript=record.get("transcript"), cut_short=cut_short_by(record))


def cut_short_by(record: Mapping[str, Any]) -> str | None:
    """The limit that cut a record's completed task short (its answer came from the wrap-up call), or ``None``."""
    reason = record.get("stop_reason")
    cut = record.get("partial") is True and record.get("status") == "completed"
    return str(reason) if cut and isinstance(reason, str) else None


def invalid_call_rows(messages: Iterable[Any], known_calls: set[str]) -> list[TaskRow]:
    """Delegation calls answered with an error and no record (e.g. invalid arguments)."""
    messages = list(messages)  # read twice
    replies = {getattr(m, "tool_call_id", None): m for m in messages if getattr(m, "type", "") == "tool"}
    rows: list[TaskRow] = []
    for message in messages:
        if getattr(message, "type", "") != "ai":
            continue
        for call in getattr(message, "tool_calls", None) or ():
            reply = replies.get(call.get("id"))
            if (call.get("name") in DELEGATION_TOOLS and call.get("id") not in known_calls
                    and reply is not None and getattr(reply, "status", "") == "error"):
                rows.append(_refused(call.get("id"), call.get("args") or {}, _text(reply)))
        for call in getattr(message, "invalid_tool_calls", None) or ():
            if call.get("name") in DELEGATION_TOOLS and call.get("id") not in known_calls:
                reason = call.get("error") or "the call's arguments could not be parsed"
                rows.append(_refused(call.get("id"), {}, f"invalid arguments: {reason}"))
    return rows


def task_rows(values: Mapping[str, Any]) -> list[TaskRow]:
    """Every task of a thread, oldest first."""
    rows = [sync_row(r) for r in (values.get(LEDGER_KEY) or {}).values()]
    full_texts(rows, (values.get(LEDGER_KEY) or {}).values(), values.get("messages") or ())
    rows += [background_row(r) for r in (values.get(ASYNC_LEDGER_KEY) or {}).values()]
    known = {r.tool_call_id for r in rows if r.tool_call_id}
    rows += invalid_call_rows(values.get("messages") or (), known)
    return sorted(rows, key=lambda r: r.started_at or float("inf"))


def full_texts(rows: list[TaskRow], records: Iterable[Mapping[str, Any]], messages: Iterable[Any]) -> None:
    """Put back the full description and answer of rows whose ledger record holds previews (from the messages)."""
    # A text is a preview when shorter than its ``<key>_chars``.
    clipped = {r.get("tool_call_id") for r in records if r.get("tool_call_id") and any(
        isinstance(r.get(k), str) and isinstance(r.get(f"{k}_chars"), int) and r[f"{k}_chars"] > len(r[k])
        for k in ("description", "result", "error"))}
    if not clipped:
        return
    messages = list(messages)  # read twice
    calls = {call["id"]: call["args"]["description"] for m in messages if getattr(m, "type", "") == "ai"
             for call in getattr(m, "tool_calls", None) or ()
             if call.get("id") in clipped and isinstance((call.get("args") or {}).get("description"), str)}
    replies = {m.tool_call_id: _text(m) for m in messages
               if getattr(m, "type", "") == "tool" and getattr(m, "tool_call_id", None) in clipped}
    for row in (row for row in rows if row.tool_call_id in clipped):
        row.description = calls.get(row.tool_call_id, row.description)
        if (reply := replies.get(row.tool_call_id)) is not None and row.status == "completed":
            row.result = reply
        elif reply is not None and row.error is not None:
            row.error = reply.removeprefix(f"Subagent '{row.agent_type}' failed: ")


def _refused(call_id: str | None, args: Mapping[str, Any], error: str) -> TaskRow:
    agent = args.get("subagent_type")
    return TaskRow(id=str(call_id or "unknown-call"), kind="refused", status="error",
                   agent_type=agent if isinstance(agent, str) and agent else "?",
                   description=str(args.get("description") or ""), tool_call_id=call_id, error=error)


def _text(message: Any) -> str:
    with contextlib.suppress(Exception):  # a reply with odd content still names the failure
        return str(message.text)
    return str(getattr(message, "content", ""))


