"""A ledger's LangGraph channel: state shows a plain dict, checkpoints store sealed chunks.

A ledger (task id -> record) only grows, and every checkpoint carries it
whole: on ``SqliteSaver`` each checkpoint is one blob of all channel values,
so a thread of n delegations stores n ledgers of up to n records. This
channel keeps what state shows (and what reducers see) a plain ``dict``,
but what it hands the checkpointer is packed:

* the first ``CHUNK_RECORDS * k`` records in ``k`` **sealed chunks**, each
  serialized and zlib-compressed once, when it fills, and reused verbatim by
  every later checkpoint (a record of a sealed chunk that changes reseals
  that chunk only);
* the newest records (fewer than :data:`CHUNK_RECORDS`) as a plain **tail**,
  and from the first chunk the channel's own serializer cannot store (a
  record holding an object only a saver with ``pickle_fallback`` stores)
  every record after it.

So a checkpoint costs the saver a copy of bytes it already has, not a
re-serialization of every record, and a record costs the database about an
seventh of its plain bytes once sealed. A ledger too small to seal is stored
exactly as before (a plain dict), and a plain dict in an older checkpoint
loads as it always did. Chunks are decoded only when the value is read, and
the process keeps the last :data:`CACHED_CHUNKS` decoded chunks, so the next
run on a thread copies records (a shallow copy each: about 3 ms at 5,000)
instead of decoding them; no two loads share a record dict.

Reading a raw checkpoint (``saver.get_tuple(...).checkpoint["channel_values"]``)
needs :func:`ledger_from_checkpoint`; ``graph.get_state`` needs nothing.

Example::

    class MyState(AgentState):
        runs: NotRequired[Annotated[dict[str, dict], LedgerChannel(dict, merge_records)]]

    ledger = ledger_from_checkpoint(saved.checkpoint["channel_values"]["runs"])  # a plain dict
"""

from __future__ import annotations

import itertools
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from typing import Any, Self

from langgraph.channels import LastValue
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.errors import EmptyChannelError
from langgraph.types import Overwrite

Ledger = dict[str, dict[str, Any]]

CHUNK_RECORDS = 64
"""Records per sealed chunk: large enough to compress well, small enough to reseal cheaply."""

PACKED_MARK = "__ledger_chunks__"
"""The key that tells a packed ledger (a dict that also holds ``sealed`` and ``tail``) from a plain one."""

_OVERWRITE = "__overwrite__"  # LangGraph's sentinel key for `Overwrite` once it crossed JSON
_serde = JsonPlusSerializer()
MISSING = LastValue(object).value  # LangGraph's "no value yet" sentinel, which it does not export


def _seal(records: Ledger) -> list[Any]:
    kind, data = _serde.dumps_typed(records)
    return [kind, zlib.compress(data, 6)]


def _try_seal(records: Ledger) -> list[Any] | None:
    """A sealed chunk, or ``None`` for records only the saver's own serializer can store (they stay plain)."""
    try:
        return _seal(records)
    except (TypeError, ValueError):  # e.g. an object for a saver with ``pickle_fallback``
        return None


CACHED_CHUNKS = 256
"""Decoded chunks kept per process (about 16k records), so the next run on a thread skips decoding."""

_decoded: OrderedDict[tuple[str, bytes], tuple[int, Ledger]] = OrderedDict()  # key -> (last use, chunk)
_decoded_lock = threading.Lock()
_clock = itertools.count()


def _unseal(blob: Sequence[Any], since: int) -> Ledger:
    """A sealed chunk's records (the chunk dict is the cache's: copy it before changing it).

    ``since`` is when the read that wants it began: a chunk that read used is
    never evicted for another of its chunks. A ledger longer than the cache
    then keeps its first chunks cached, rather than evicting each chunk just
    before its next use, as a plain LRU scanned in order does.
    """
    key = (blob[0], bytes(blob[1]))
    with _decoded_lock:
        found = _decoded.get(key)
        if found is not None:
            _decoded[key] = (next(_clock), found[1])
            _decoded.move_to_end(key)
            return found[1]
    chunk = _serde.loads_typed((key[0], zlib.decompress(key[1])))
    if not isinstance(chunk, dict) or not all(isinstance(r, dict) for r in chunk.values()):
        raise ValueError(f"it is not a ledger (task id -> record dict): {type(chunk).__name__}")
    with _decoded_lock:
        while len(_decoded) >= CACHED_CHUNKS:
            oldest = next(iter(_decoded))
            if _decoded[oldest][0] >= since:
                return chunk  # the cache holds this read's own chunks: leave them
            del _decoded[oldest]
        _decoded[key] = (next(_clock), chunk)
    return chunk


def _copied(chunk: Ledger) -> Ledger:
    """The chunk's records as this load's own dicts: a record changed in place must not reach the cache."""
    return {task_id: record.copy() for task_id, record in chunk.items()}


def is_packed(value: Any) -> bool:
    """Whether a checkpointed ledger value is packed (sealed chunks and a tail).

    Anything else is a plain ledger, even a dict with the mark's key: a plain
    ledger's records may look like anything.
    """
    return (isinstance(value, dict) and value.get(PACKED_MARK) == 1
            and isinstance(value.get("sealed"), list) and isinstance(value.get("tail"), dict))


def _chunks(value: dict[str, Any]) -> Iterator[Ledger]:
    """A packed ledger's sealed chunks, decoded (each checked to be a ledger when first decoded)."""
    since = next(_clock)
    for index, blob in enumerate(value["sealed"]):
        try:
            chunk = _unseal(blob, since)
        except Exception as exc:  # a damaged checkpoint: say which chunk
            raise ValueError(f"sealed chunk {index} does not decode ({type(exc).__name__}: {exc})") from exc
        yield chunk


def ledger_from_checkpoint(value: Any) -> Ledger:
    """A ledger as a checkpoint stored it (packed or plain, or absent) as the plain dict state shows."""
    if not is_packed(value):
        return dict(value or {})
    out: Ledger = {}
    for chunk in _chunks(value):
        out.update(_copied(chunk))
    out.update(value["tail"])
    return out


def _unpacked(write: Any) -> Any:
    if isinstance(write, Overwrite) and is_packed(write.value):
        return Overwrite(ledger_from_checkpoint(write.value))
    return ledger_from_checkpoint(write) if is_packed(write) else write


def _replaces_all(write: Any) -> bool:
    """Whether LangGraph takes ``write`` as an ``Overwrite`` (the same three forms its channels accept)."""
    if isinstance(write, Overwrite):
        return True
    return isinstance(write, dict) and ((len(write) == 1 and _OVERWRITE in write)
                                        or (write.get("type") == _OVERWRITE and "value" in write))


def _replacement(write: Any) -> Any:
    """The value a replacing write (see :func:`_replaces_all`) puts in place of the ledger."""
    if isinstance(write, Overwrite):
        return write.value
    return write[_OVERWRITE] if _OVERWRITE in write else write["value"]


def _fold(operator: Callable[[Ledger, Ledger], Ledger], writes: list[Any]) -> Any:
    """``functools.reduce(operator, writes)`` for an associative operator, folded pairwise.

    Each merge copies its left side, so a left-to-right fold of n sibling
    writes copies O(n²) records (2,000 ``task`` calls in one message: two
    million); pairwise, it copies O(n log n).
    """
    while len(writes) > 1:
        pairs = zip(writes[::2], writes[1::2], strict=False)  # an odd last write waits a round
        writes = [operator(left, right) for left, right in pairs] + writes[len(writes) - len(writes) % 2:]
    return writes[0]


class LedgerChannel(BinaryOperatorAggregate[Ledger]):
    """A reducer channel for a ledger dict whose checkpoints reuse sealed, compressed chunks.

    ``operator`` is the ledger's reducer (``merge_records``,
    ``merge_async_records``): it must keep existing keys where they are and
    add new ones at the end, as ``{**left, **right}`` does, and be
    associative (the writes of one step are folded together first).
    """

    __slots__ = ("_pending", "_sealed", "_where", "_packed")

    def __init__(self, typ: Any = dict,
                 operator: Callable[[Ledger, Ledger], Ledger] | None = None) -> None:
        if operator is None:
            raise TypeError("LedgerChannel needs the ledger's reducer: LedgerChannel(dict, merge_records)")
        super().__init__(typ, operator)
        self._pending: dict[str, Any] | None = None  # a packed checkpoint not decoded yet
        self._sealed: list[list[Any] | None] = []  # chunk blobs in order; None = reseal
        self._where: dict[str, int] = {}  # id of a sealed record -> its chunk
        self._packed: Any = None  # what checkpoint() returns until the next update

    def copy(self) -> Self:
        # Copies serve fresh reads and are not checkpointed: they share the
        # value (never changed in place) and would reseal from it if they were.
        self._decode()  # once, here, rather than once in every copy
        return super().copy()

    def from_checkpoint(self, checkpoint: Any) -> Self:
        if not is_packed(checkpoint):
            return super().from_checkpoint(checkpoint)
        loaded = self.__class__(self.typ, self.operator)
        loaded.key = self.key
        loaded._pending = loaded._packed = checkpoint
        return loaded

    def _decode(self) -> None:
        packed, self._pending = self._pending, None
        if packed is None:
            return
        value: Ledger = {}
        try:
            for index, chunk in enumerate(_chunks(packed)):
                value.update(_copied(chunk))
                self._where.update(dict.fromkeys(chunk, index))
        except ValueError as exc:
            raise ValueError(f"ledger {self.key!r} in the checkpoint: {exc}") from exc
        value.update(packed["tail"])
        self._sealed = list(packed["sealed"])
        if len(self._where) != len(self._sealed) * CHUNK_RECORDS or not self._where.keys().isdisjoint(packed["tail"]):
            # Chunks not of CHUNK_RECORDS distinct records, or a record in a chunk and the tail (another
            # version's size, or damage): positions are not ours, so reseal everything on the next change.
            self._sealed, self._where = [], {}
        self.value = value

    def update(self, values: Sequence[Any]) -> bool:
        if not values:  # LangGraph offers every unwritten channel an empty update, each step
            return False
        self._decode()
        if len(values) == 1 and self._adds_records(write := values[0]):
            # One delegation's own records (the usual write): merged as the base class would, without
            # its checks for the packed and replacing forms that such a write cannot take.
            self.value = self.operator(self.value, write)
            self._packed = None
            if self._where:
                for task_id in write:
                    if (index := self._where.get(task_id)) is not None:
                        self._sealed[index] = None
            return True
        try:  # a packed value written back (a raw checkpoint's) is the ledger it packs
            values = [_unpacked(write) for write in values]
        except ValueError as exc:
            raise ValueError(f"ledger {self.key!r}: a packed value written to it: {exc}") from exc
        replaced = any(_replaces_all(write) for write in values)
        for write in values if replaced else ():
            if _replaces_all(write) and not isinstance(value := _replacement(write), dict):
                raise ValueError(f"ledger {self.key!r}: Overwrite needs a dict of records (task id -> record), "
                                 f"not a {type(value).__name__}; Overwrite({{}}) empties it")
        if len(values) > 1 and not replaced:
            # Siblings finishing in one step: fold their small writes first, so the
            # ledger is copied once per step, not once per sibling (the reducer is associative).
            values = [_fold(self.operator, values)]
        if not super().update(values):
            return False
        self._packed = None
        if replaced:
            self._sealed, self._where = [], {}
            return True
        for write in values:
            for task_id in write or ():
                if (index := self._where.get(task_id)) is not None:
                    self._sealed[index] = None
        return True

    def _adds_records(self, write: Any) -> bool:
        """Whether ``write`` is a plain ledger of records, merged into a present value."""
        return (isinstance(write, dict) and self.value is not MISSING and PACKED_MARK not in write
                and not _replaces_all(write))

    def get(self) -> Ledger:
        # Read by every node of every step: written out rather than through the base class.
        if self._pending is not None:
            self._decode()
        if self.value is MISSING:
            raise EmptyChannelError()
        return self.value

    def is_available(self) -> bool:
        return self._pending is not None or self.value is not MISSING

    def checkpoint(self) -> Any:
        if self._pending is not None:
            return self._pending
        if not super().is_available():
            return super().checkpoint()
        if self._packed is None:
            self._packed = self._pack(self.value)
        return self._packed

    def _pack(self, value: Ledger) -> Any:
        """Reseal changed chunks, seal full ones, and return the packed value (plain if nothing sealed)."""
        if len(self._where) > len(value):  # the reducer dropped records: start over
            self._sealed, self._where = [], {}
        for index, blob in enumerate(self._sealed):
            if blob is None:
                blob = _try_seal(dict(islice(value.items(), index * CHUNK_RECORDS, (index + 1) * CHUNK_RECORDS)))
                if blob is None:
                    self._keep_sealed(index)
                    break
                self._sealed[index] = blob
        done = len(self._sealed) * CHUNK_RECORDS
        rest = islice(value.items(), done, None)
        for _ in range((len(value) - done) // CHUNK_RECORDS):
            chunk = dict(islice(rest, CHUNK_RECORDS))
            if (blob := _try_seal(chunk)) is None:
                break
            self._where.update(dict.fromkeys(chunk, len(self._sealed)))
            self._sealed.append(blob)
        if not self._sealed:
            return value
        done = len(self._sealed) * CHUNK_RECORDS
        tail = dict(reversed(list(islice(reversed(value.items()), len(value) - done))))
        return {PACKED_MARK: 1, "sealed": list(self._sealed), "tail": tail}

    def _keep_sealed(self, count: int) -> None:
        """Keep only the first ``count`` sealed chunks: the records after them go in the plain tail."""
        del self._sealed[count:]
        self._where = {task_id: index for task_id, index in self._where.items() if index < count}
