"""Every delegation's message history, readable after the run: one :class:`TranscriptSink` per runner, and the
record's ``transcript`` says where (``jsonl:<path>`` with ``sessions_dir``, ``store:<namespace>`` with a store,
``checkpoint:<namespace>``, else ``memory:<task_id>``: docs/transcripts-and-streaming.md)."""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import errno
import functools
import hashlib
import json
import os
import re
import stat
import sys
import threading
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any, Protocol, cast

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph.message import add_messages

from subagents._errors import InvalidArgument, SpecError, TranscriptFileError, TranscriptUnavailable, UnknownTask
from subagents._ledger import saved_value

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,119}")


def safe_component(value: object) -> str:
    """One path component for any id: a plain name as it is, else a readable prefix and a hash of the whole."""
    text = str(value)
    if _PLAIN.fullmatch(text) and ".." not in text:
        return text
    readable = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:40]
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"id-{readable}-{digest}" if readable else f"id-{digest}"


# -- The in-process table: oldest dropped first past ``max_bytes`` (a process that delegates without end must not
# grow without end). Kept serialized (compressed from COMPRESS_FROM), so the bound counts what the process holds;
# what the serializer refuses is kept as objects and counted by walking them. Each read returns fresh messages.

DEFAULT_MAX_BYTES = 1024 * 1024  # about 1,500 short child runs, or 100 with 10 KB tool arguments
ENTRY_BYTES = 300  # what an entry costs beside its data: the key, the tuple, the bytes' header, the dict slot

_serde = JsonPlusSerializer()


class TranscriptTable:
    """Task id -> messages, oldest evicted first past ``max_bytes`` (real bytes, see above)."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.bytes = 0
        self._items: collections.OrderedDict[str, tuple[Any, int]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.max_bytes = max_bytes

    @property
    def max_bytes(self) -> int:
        """The bound in bytes; setting it drops the oldest transcripts at once if they no longer fit."""
        return self._max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SpecError(f"TranscriptTable max_bytes must be a whole number of bytes >= 0, not {value!r:.80}")
        with self._lock:
            self._max_bytes = value
            self._evict()

    def put(self, task_id: str, messages: list[BaseMessage]) -> None:
        stored: Any = list(messages)
        try:
            kind, data = _serde.dumps_typed(stored)
            packed = zlib.compress(data, 1) if len(data) >= COMPRESS_FROM else data
            stored, size = (kind, packed, packed is not data), ENTRY_BYTES + len(packed)
        except Exception:  # noqa: BLE001
            size = ENTRY_BYTES + deep_size(stored)
        with self._lock:
            self.bytes += size - self._items.pop(task_id, (None, 0))[1]  # popped: the new one is the newest
            self._items[task_id] = (stored, size)
            self._evict()

    def _evict(self) -> None:
        # The newest transcript stays even when it alone is over the bound: the run just ended needs it.
        while self.bytes > self._max_bytes and len(self._items) > 1:
            _, (_, dropped) = self._items.popitem(last=False)
            self.bytes -= dropped

    def get(self, task_id: str) -> list[BaseMessage] | None:
        with self._lock:
            item = self._items.get(task_id)
        if item is None:
            return None
        stored = item[0]
        if isinstance(stored, tuple):
            kind, data, compressed = stored
            return cast("list[BaseMessage]", _serde.loads_typed((kind, zlib.decompress(data) if compressed else data)))
        return list(stored)

    def __len__(self) -> int:
        return len(self._items)


# Shorter ones are kept uncompressed: they shrink by only half, and retaking the lock zlib gives up costs more.
COMPRESS_FROM = 4096


def deep_size(value: Any) -> int:
    """Bytes held by ``value`` and what it refers to (each object counted once), as ``sys.getsizeof`` counts them."""
    seen: set[int] = set()
    stack, total = [value], 0
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item, 64)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        elif hasattr(item, "__dict__") and not isinstance(item, type):
            stack.append(vars(item))
    return total


MEMORY = TranscriptTable()  # the process-wide table the memory sink writes to

STORE_NAMESPACE = "subagent_transcripts"
NO_TRANSCRIPT = "none:"  # a delegation refused before any child ran: it reads back as empty


class TranscriptSink(Protocol):
    """Where one task's messages go; ``end`` returns the record's ``transcript`` reference. ``records``: False
    when nothing needs collecting; ``streams`` (default True): False when the messages arrive whole at ``end``."""

    records: bool

    def add(self, message: BaseMessage) -> None: ...
    def end(self, messages: list[BaseMessage], *, cancelled: bool = False) -> str: ...


class _WholeAtEnd:
    """A sink whose messages arrive whole at ``end``."""

    records = True
    streams = False

    def add(self, message: BaseMessage) -> None:
        pass


class CheckpointSink(_WholeAtEnd):
    """The child's own checkpoints already hold its history: nothing to collect."""

    records = False

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace

    def end(self, messages: list[BaseMessage], *, cancelled: bool = False) -> str:
        return f"checkpoint:{self.namespace}"


class JsonlSink:
    """One JSONL file per task, written while the child runs."""

    records = True

    def __init__(self, path: Path, header: Mapping[str, Any], *, root: Path | None = None) -> None:
        self.path = path
        # Opened from ``root`` down, following no symlink: a link planted in the sessions folder never leads out.
        fd = _append_beneath(root or path.parent, path)
        # A task resumed after an approval continues its file (an empty one is begun like a new one).
        resumed = path.exists() and path.stat().st_size > 0
        self._written: set[str] = set()
        # A lone surrogate in a model's text must not cost the transcript its message.
        self._file: Any = open(fd, "a", encoding="utf-8", errors="backslashreplace")
        if not resumed:
            self._write(header)
            return
        with path.open(encoding="utf-8", errors="replace", newline="") as handle:
            for line in handle:  # the messages it holds are not written again
                with contextlib.suppress(ValueError, AttributeError):
                    data = json.loads(line).get("data") or {}
                    if isinstance(data, dict) and data.get("id"):
                        self._written.add(str(data["id"]))
        if not line.endswith("\n"):
            self._file.write("\n")  # a crash mid-write left a torn line: the next message gets its own

    def _write(self, obj: Mapping[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(obj, default=str, ensure_ascii=False) + "\n")
            self._file.flush()

    def add(self, message: BaseMessage) -> None:
        if message.id is not None:
            if message.id in self._written:
                return
            self._written.add(message.id)
        self._write(message_to_dict(message))

    def end(self, messages: list[BaseMessage], *, cancelled: bool = False) -> str:
        if cancelled:
            self._write({"type": "cancelled"})
        if self._file is not None:
            self._file.close()
            self._file = None
        return f"jsonl:{self.path}"


class StoreSink(_WholeAtEnd):
    """One item per task in a ``BaseStore``; with no store, the process-wide, size-bounded :data:`MEMORY` table."""

    def __init__(self, store: Any, thread_id: Any, task_id: str, header: Mapping[str, Any]) -> None:
        self.store, self.task_id, self.header = store, task_id, dict(header)
        self.namespace = (STORE_NAMESPACE, safe_component(thread_id or "no-thread"))

    def end(self, messages: list[BaseMessage], *, cancelled: bool = False) -> str:
        if self.store is None:
            MEMORY.put(self.task_id, messages)
            return f"memory:{self.task_id}"
        value: dict[str, Any] = {"header": self.header, "messages": [message_to_dict(m) for m in messages]}
        if cancelled:
            value["cancelled"] = True
        self.store.put(self.namespace, self.task_id, value)
        return "store:" + "/".join(self.namespace)


def sink_chooser(sessions_dir: str | os.PathLike[str] | None, transcript_store: Any) -> Callable[..., TranscriptSink]:
    """Pick the sink kind once; the factory makes one sink per task from keywords (``task_id``, ``thread_id``...)."""
    if sessions_dir is not None:
        root = Path(sessions_dir).expanduser().absolute()

        def jsonl(**task: Any) -> TranscriptSink:
            return JsonlSink(jsonl_path(root, task["thread_id"], task["task_id"]), header_for(**task), root=root)

        return jsonl
    if transcript_store is not None:
        return lambda **task: StoreSink(task["store"] if transcript_store is True else transcript_store,
                                        task["thread_id"], task["task_id"], header_for(**task))
    return lambda **task: (CheckpointSink(task["namespace"]) if task["has_checkpointer"]
                           else StoreSink(None, None, task["task_id"], {}))


def _append_beneath(root: Path, path: Path) -> int:
    """``path`` (inside ``root``) opened to append, its folders made, no symlink followed below ``root``."""
    names = path.relative_to(root).parts
    root.mkdir(parents=True, exist_ok=True)
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in names[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=folder)
            try:
                inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
            except OSError:
                raise TranscriptFileError(os.fspath(path), f"{name!r} on its way is a symlink or no folder "
                                          "(no symlink in the sessions folder is followed)") from None
            os.close(folder)
            folder = inner
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(names[-1], flags, 0o666, dir_fd=folder)
        except OSError:
            raise TranscriptFileError(os.fspath(path), "is a symlink or cannot be opened to append") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise TranscriptFileError(os.fspath(path), "not a regular file (a pipe, socket or device is never written)")
        os.set_blocking(fd, True)
        return fd
    finally:
        os.close(folder)


def jsonl_path(sessions_dir: str | os.PathLike[str], thread_id: Any, task_id: Any) -> Path:
    """Where a task's JSONL transcript is written: always inside ``sessions_dir``."""
    root = Path(sessions_dir).expanduser().absolute()
    path = root / safe_component(thread_id or "no-thread") / "subagents" / f"agent-{safe_component(task_id)}.jsonl"
    resolved_root, resolved = root.resolve(), path.resolve()  # a symlinked folder may lead out
    if resolved != resolved_root and resolved_root not in resolved.parents:
        raise InvalidArgument(f"path {str(path)[:200]!r} leaves its folder {str(resolved_root)!r}")
    return path


def left_by_call(sessions_dir: str | os.PathLike[str] | None, thread_id: Any, call_ids: set[str],
                 taken: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Call id -> (task id, ``jsonl:`` reference) of the JSONL transcripts a thread's tasks began for ``call_ids``,
    from each file's header (a stopped task has no record to name its file); of several for one call, the newest."""
    if sessions_dir is None or not call_ids:
        return {}
    root = Path(sessions_dir).expanduser().absolute()
    found: dict[str, tuple[float, str, str]] = {}
    try:
        folder = jsonl_path(root, thread_id, "any").parent
    except InvalidArgument:  # the thread's folder leads outside the sessions folder (a symlink): nothing of it is read
        return {}
    for path in folder.glob("agent-*.jsonl"):
        try:
            with open_transcript_file(path) as handle:
                header = json.loads(handle.readline(64 * 1024))
                when = os.fstat(handle.fileno()).st_mtime
        except (OSError, LookupError, ValueError):
            continue
        if not isinstance(header, dict) or not isinstance(header.get("metadata"), dict):
            continue
        task_id, call = header.get("id"), header["metadata"].get("tool_call_id")
        if (call in call_ids and isinstance(task_id, str) and task_id not in taken
                and jsonl_path(root, thread_id, task_id) == path and (call not in found or when > found[call][0])):
            found[call] = (when, task_id, f"jsonl:{path}")
    return {call: (task_id, ref) for call, (_, task_id, ref) in found.items()}


def header_for(*, task_id: str, agent_type: str, thread_id: Any, tool_call_id: str | None, **_: Any) -> dict[str, Any]:
    return {"id": task_id, "created_at": dt.datetime.now(dt.UTC).isoformat(), "cwd": os.getcwd(),
            "metadata": {"agent_type": agent_type, "parent_session_id": None if thread_id is None else str(thread_id),
                         "tool_call_id": tool_call_id}}


MAX_JSONL_BYTES = 256 * 1024 * 1024  # a bigger transcript is an error naming it, not a process out of memory
# Linux: a file is looked at through an ``O_PATH`` descriptor, which opens nothing, before it is opened.
_LOOK_FIRST = hasattr(os, "O_PATH") and os.path.isdir("/proc/self/fd")


def open_if_regular(path: str | os.PathLike[str], flags: int = os.O_RDONLY, *, dir_fd: int | None = None) -> int:
    """A descriptor of ``path`` opened with ``flags``, if it is a regular file and not a symlink (else ``OSError``
    ``ELOOP``/``EINVAL``). On Linux it looks first (a pipe's writer waits, a device acts on being opened), then
    reopens that same file through the descriptor; elsewhere it opens without blocking, then looks."""
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    if _LOOK_FIRST:
        handle = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            kind = os.fstat(handle).st_mode
            if not stat.S_ISREG(kind):
                raise OSError(errno.ELOOP if stat.S_ISLNK(kind) else errno.EINVAL,
                              "a symlink" if stat.S_ISLNK(kind) else NOT_REGULAR, os.fspath(path))
            return os.open(f"/proc/self/fd/{handle}", flags & ~os.O_NOFOLLOW)
        finally:
            os.close(handle)
    fd = os.open(path, flags | os.O_NONBLOCK, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, NOT_REGULAR, os.fspath(path))
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


NOT_REGULAR = "not a regular file (a pipe, socket or device is never opened)"


def open_transcript_file(path: str | os.PathLike[str]) -> IO[bytes]:
    """``path`` opened to read, if it is a regular file and not a symlink (:func:`open_if_regular`)."""
    try:
        return os.fdopen(open_if_regular(path), "rb")
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EINVAL):
            raise TranscriptFileError(os.fspath(path), "a symlink (never followed)" if exc.errno == errno.ELOOP
                                      else NOT_REGULAR) from None
        raise


def read_jsonl(source: str | os.PathLike[str] | IO[bytes], *,
               max_bytes: int = MAX_JSONL_BYTES) -> tuple[dict[str, Any], list[BaseMessage]]:
    """The header and messages of a JSONL transcript (a path, read only if a regular file, or an open binary
    file); a torn line, or one that is no message, is skipped; past ``max_bytes``, :class:`TranscriptFileError`."""
    if isinstance(source, (str, os.PathLike)):
        with open_transcript_file(source) as handle:
            return read_jsonl(handle, max_bytes=max_bytes)
    data = source.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TranscriptFileError(str(getattr(source, "name", "?")), f"holds more than {max_bytes:,} bytes")
    header: dict[str, Any] = {}
    messages: list[BaseMessage] = []
    for number, line in enumerate(data.splitlines()):
        try:
            obj = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue  # a crash mid-write leaves a torn line
        if number == 0:
            header = obj if isinstance(obj, dict) else {}
        elif isinstance(obj, dict) and "data" in obj:
            with contextlib.suppress(KeyError, TypeError, ValueError):  # pydantic's ValidationError is a ValueError
                messages.extend(messages_from_dict([obj]))
    return header, messages


def get_transcript(graph: Any, config: Mapping[str, Any], task_id: str) -> list[BaseMessage]:
    """The full message history of one task of a thread, wherever it was kept: ``graph`` is the parent graph (its
    state read with ``config``) or, for a run without a checkpointer, the state it returned."""
    thread_id = (config.get("configurable") or {}).get("thread_id")
    values = graph if isinstance(graph, Mapping) else graph.get_state(config).values
    record = next((ledger[task_id] for ledger in values.values() if isinstance(ledger, Mapping) and isinstance(
        ledger.get(task_id), Mapping) and ledger[task_id].get("id", task_id) == task_id), None)
    if record is None:
        raise UnknownTask(f"no task {task_id!r} in the ledgers of thread {thread_id!r}")
    return read_transcript(record, thread_id=thread_id,
                           checkpointer=getattr(graph, "checkpointer", None),
                           store=getattr(graph, "store", None))


def child_messages(checkpointer: Any, saved: Any) -> list[BaseMessage]:
    """The ``messages`` of a child's saved checkpoint, stored whole or as deltas the saver replays."""
    channel = DeltaChannel(lambda state, writes: functools.reduce(cast("Any", add_messages), writes, [*(state or ())]),
                           list)
    return list(saved_value(checkpointer, saved, "messages", channel) or [])


def read_transcript(record: Mapping[str, Any], *, thread_id: Any, checkpointer: Any = None,
                    store: Any = None,
                    open_file: Callable[[str], IO[bytes]] = open_transcript_file) -> list[BaseMessage]:
    """The transcript ``record`` points at; a damaged record or a file gone raises :class:`TranscriptUnavailable`
    naming the task. A ``jsonl:`` file is opened by ``open_file`` (default: any regular file), read up to
    :data:`MAX_JSONL_BYTES`."""
    task_id = record.get("id")
    where = record.get("transcript") or ""
    if not isinstance(where, str):
        raise TranscriptUnavailable(f"task {task_id!r}: field 'transcript' must be text such as 'jsonl:<path>', "
                                    f"not {type(where).__name__}")
    kind, _, ref = where.partition(":")
    if kind == "none":
        return []
    if kind == "jsonl":
        try:
            with open_file(ref) as handle:
                return read_jsonl(handle)[1]
        except FileNotFoundError as exc:  # moved or deleted since: the record is fine, its file is gone
            raise TranscriptUnavailable(f"task {task_id!r}: its transcript file {ref!r} is missing "
                                        "(moved or deleted since the task ran)") from exc
    if kind == "store":
        item = store.get(tuple(ref.split("/")), task_id) if store is not None else None
        if item is None:
            raise TranscriptUnavailable(f"task {task_id!r}: no transcript in the store at {ref!r}")
        stored = item.value.get("messages") if isinstance(item.value, Mapping) else None
        if not isinstance(stored, list):
            raise TranscriptUnavailable(f"task {task_id!r}: the store item at {ref!r} has no 'messages' list")
        try:
            return messages_from_dict(stored)
        except (KeyError, TypeError, ValueError) as exc:
            raise TranscriptUnavailable(f"task {task_id!r}: the store item at {ref!r} holds a message that "
                                        f"cannot be read ({type(exc).__name__}: {exc})") from None
    if kind == "checkpoint":
        if checkpointer is None:
            raise TranscriptUnavailable(f"task {task_id!r}: its transcript is the child's checkpoints at namespace "
                                        f"{ref!r}, and no checkpointer was given to read them: pass the parent graph "
                                        "(get_transcript) or its checkpointer (read_transcript), not only its state")
        # LangGraph files a thread under str(thread_id); a UUID or int id must be looked up the same way.
        key = None if thread_id is None else str(thread_id)
        saved = checkpointer.get_tuple({"configurable": {"thread_id": key, "checkpoint_ns": ref}})
        if saved is None:
            raise TranscriptUnavailable(
                f"task {task_id!r}: no child checkpoint at namespace {ref!r}: the checkpointer holds none for it "
                '(a parent run with durability="exit" keeps no child checkpoints, and a thread deleted or '
                "pruned keeps nothing; sessions_dir= keeps every transcript)")
        return child_messages(checkpointer, saved)
    if kind == "memory":
        messages = MEMORY.get(ref)
        if messages is not None:
            return messages
        raise TranscriptUnavailable(
            f"task {task_id!r}: its in-memory transcript is gone: the process restarted, or newer transcripts "
            f"pushed it out of the table's {MEMORY.max_bytes:,} bytes (subagents._transcripts.MEMORY.max_bytes). "
            "sessions_dir= keeps every transcript; a checkpointer or transcript_store= keeps those of task "
            "calls, while a background task's stays in this table unless sessions_dir= is given")
    raise TranscriptUnavailable(f"task {task_id!r} has no transcript location")
