"""Ledgers (task id -> compact record) in checkpoints: read back without history, and as data.

:class:`LedgerChannel` stores a ledger whole beside whole ``messages``, or as deltas beside delta ones;
:class:`DataOnlySerializer` reads checkpoints as data, never code; :func:`saved_value` rebuilds a delta channel.
"""

from __future__ import annotations

import contextvars
import dataclasses
import itertools
import sys
import zlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Self

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.channels import DeltaChannel
from langgraph.channels.base import BaseChannel
from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Overwrite

from subagents._errors import InvalidArgumentType, StoredDataError, UntrustedDataError

# -- Checkpoints read as data. LangGraph's default serializer imports and calls what the data names (code
# execution for a file a cloned folder brought): DataOnlySerializer builds only LangGraph's safe types (all this
# library writes) and refuses pickle and anything else before it is imported.

_BLOCKED_KINDS = frozenset({"msgpack_blocked", "msgpack_method_blocked"})
_refused: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("data_only_refused", default=None)


def _on_event(event: SerdeEvent) -> None:
    refused = _refused.get()
    if refused is not None and event.get("kind") in _BLOCKED_KINDS:
        name = ".".join(p for p in (event.get("module"), event.get("name"), event.get("method")) if p)
        refused.append(name)


register_serde_event_listener(_on_event)


class DataOnlySerializer(JsonPlusSerializer):
    """LangGraph's checkpoint serializer, restricted to its safe types; anything else is refused.

    Args:
        source: what the data is read from, named in every refusal (a path, a url).
        allowed: more ``(module, name)`` types to construct, for state that holds them.
    """

    def __init__(self, source: str, allowed: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__(pickle_fallback=False, allowed_json_modules=None,
                         allowed_msgpack_modules=tuple(allowed) or None)
        self.source = source

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind = data[0]
        if kind in ("pickle", "json"):
            # Neither is written here: pickle is code by design, and the legacy JSON form revives by import.
            raise UntrustedDataError(f"{self.source}: holds {kind} data, which a data-only reader does not load; "
                                     "refused (this state was not written by this program)")
        refused: list[str] = []
        token = _refused.set(refused)
        try:
            value = super().loads_typed(data)
        finally:
            _refused.reset(token)
        if refused:
            raise UntrustedDataError(
                f"{self.source}: holds an object of type {refused[0]}, which reading it would import and call; "
                "refused: nothing was run (this state was not written by this program; delete it, or read it "
                "with code you trust)")
        return value


Ledger = dict[str, dict[str, Any]]

_OVERWRITE = "__overwrite__"  # LangGraph's sentinel key for `Overwrite` once it crossed JSON
_WHOLE = sys.maxsize  # the snapshot frequency of a ledger whole in every checkpoint
_serde = DataOnlySerializer("a ledger in a checkpoint")


def merge_async_records(left: Ledger | None, right: Ledger | None) -> Ledger:
    """Reducer for ``async_tasks``: a later update of an id replaces only the fields it names (so two
    tools touching different tasks in one step never overwrite each other)."""
    for side, value in (("the ledger", left), ("the update", right)):
        if value is not None and not isinstance(value, Mapping):
            raise StoredDataError(f"async_tasks: {side} is a {type(value).__name__}, not a mapping "
                                  "(task id -> record fields)")
    if left and not right:
        return left
    merged = dict(left or {})
    for task_id, fields in (right or {}).items():
        if not isinstance(fields, Mapping):
            raise StoredDataError(f"async_tasks: the update for task {task_id!r} is a {type(fields).__name__}, "
                                  "not a mapping of fields")
        before = merged.get(task_id)
        # A damaged record in state (not a mapping) is replaced by the update rather than merged.
        merged[task_id] = {**before, **fields} if isinstance(before, Mapping) else dict(fields)
    return merged


def merge_records(left: Ledger | None, right: Ledger | None) -> Ledger:
    """Reducer for a ledger: parallel delegations each add their own ids."""
    if not left:
        return dict(right or {})
    return left if not right else {**left, **right}


@dataclasses.dataclass(frozen=True, slots=True)
class LedgerMerge:
    """A ledger channel's reducer over a batch of writes, folded pairwise: the ledger is copied once per batch."""

    operator: Callable[[Ledger, Ledger], Ledger]

    def __call__(self, base: Ledger | None, writes: Sequence[Any]) -> Ledger:
        # Folded pairwise (the operator is associative): each merge copies its left side, so O(n log n) record
        # copies instead of functools.reduce's O(n²).
        values = list(writes)
        while len(values) > 1:
            pairs = zip(values[::2], values[1::2], strict=False)  # an odd last write waits a round
            values = [self.operator(left, right) for left, right in pairs] + values[len(values) - len(values) % 2:]
        return self.operator(base or {}, values[0]) if values else base or {}


# -- A whole ledger as its checkpoint stores it: records as columns, ids as bytes. A saver keeping every version
# stores it at every delegation: compressed rows took 84 bytes a record, columns 66, with hex ids as bytes 52.

_NOTHING: Any = DeltaChannel(lambda state, _writes: state).checkpoint()  # LangGraph's "nothing stored" marker

_COLUMNS = "ledger-columns/1"
_HEX_WIDTHS = {"h": 32, "u": 36}  # a plain hex id; a UUID spelled with dashes
_HEX_DIGITS = frozenset("0123456789abcdef-")


def _hex_text(kind: str, prefix: str, data: bytes) -> list[str]:
    digits, step = data.hex(), 32
    parts = [digits[i:i + step] for i in range(0, len(digits), step)]
    if kind == "u":
        parts = [f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}" for h in parts]
    return [prefix + h for h in parts]


def _column(values: list[Any]) -> Any:
    """A field's values: a list, or ``{"k": kind, "p": prefix, "b": bytes}`` when each is the prefix and a hex id."""
    first = values[0]
    if not isinstance(first, str):
        return values
    for kind, width in _HEX_WIDTHS.items():
        size, prefix = len(first), first[:len(first) - width]
        if size < width or not _HEX_DIGITS.issuperset(first[-width:]) or not all(
                isinstance(v, str) and len(v) == size and v.startswith(prefix) for v in values):
            continue
        try:
            data = bytes.fromhex("".join(v[-width:] for v in values).replace("-", "") if kind == "u"
                                 else "".join(v[-width:] for v in values))
        except ValueError:
            continue
        if len(data) == 16 * len(values) and _hex_text(kind, prefix, data) == values:  # upper case, odd dashes: no
            return {"k": kind, "p": prefix, "b": data}
    return values


def _as_columns(ledger: Ledger) -> list[Any] | None:
    """``ledger`` as columns (``[tag, keys or None, fields of each shape, shape of each record, columns]``)."""
    records = list(ledger.values())
    if not records or any(type(r) is not dict for r in records):
        return None
    fields = tuple(records[0])
    shape_of: list[int] | None = None
    if all(tuple(r) == fields for r in records):  # one shape, as every record TaskRecord writes: column by column
        shapes, rows = [fields], [[[r[f] for r in records] for f in fields]]
    else:
        by_fields: dict[tuple[str, ...], int] = {}
        rows, shape_of = [], []
        for record in records:
            index = by_fields.setdefault(tuple(record), len(by_fields))
            if index == len(rows):
                rows.append([[] for _ in record])
            for column, value in zip(rows[index], record.values(), strict=True):
                column.append(value)
            shape_of.append(index)
        shapes = list(by_fields)
    keys = None if all(k == r.get("id") for k, r in ledger.items()) else list(ledger)
    return [_COLUMNS, keys, [list(f) for f in shapes], shape_of, [[_column(c) for c in shape] for shape in rows]]


def _from_columns(stored: list[Any]) -> Ledger:
    _, keys, shapes, shape_of, columns = stored
    lists = [[_hex_text(c["k"], c["p"], c["b"]) if isinstance(c, dict) else c for c in shape] for shape in columns]
    rows = [iter(zip(*shape, strict=True)) if shape else itertools.repeat(()) for shape in lists]
    records = ([dict(zip(shapes[0], row, strict=True)) for row in rows[0]] if shape_of is None
               else [dict(zip(shapes[i], next(rows[i]), strict=True)) for i in shape_of])
    return dict(zip(keys if keys is not None else (r["id"] for r in records), records, strict=True))


class LedgerChannel(DeltaChannel[Ledger]):
    """A ledger dict's channel: whole in every checkpoint (``snapshot_frequency=None``: a load reads no
    history), or as deltas beside delta ``messages`` (:class:`deep_agent.DeepAgentState` gives a frequency).

    ``operator`` is the ledger's reducer (``merge_records``, ``merge_async_records``): associative, keeping
    existing keys in place and adding new ones at the end, as ``{**left, **right}`` does."""

    def __init__(self, typ: Any = dict, operator: Any = None, *, snapshot_frequency: int | None = None) -> None:
        if isinstance(typ, LedgerMerge):  # LangGraph re-creating the channel as (reducer, type) for its key
            reducer, typ = typ, operator
        elif operator is None:
            raise InvalidArgumentType("LedgerChannel needs the ledger's reducer: LedgerChannel(dict, merge_records)")
        else:
            reducer = LedgerMerge(operator)
        # Whole in every checkpoint, the ledger never needs a snapshot: LangGraph's count never reaches _WHOLE
        # (which LangGraph passes back when it re-creates the channel).
        self.deltas = snapshot_frequency not in (None, _WHOLE)
        self._stored: tuple[Ledger, Any] | None = None  # the value and what checkpoint() stores for it
        # The value type is always a plain dict, whatever the annotation spells (Mapping, dict[str, dict]...).
        super().__init__(reducer, dict, snapshot_frequency=snapshot_frequency or _WHOLE)

    def __eq__(self, other: object) -> bool:
        # Two schemas may declare the same ledger key (the middleware's and the agent's own): LangGraph
        # accepts that when their channels are equal.
        return (isinstance(other, LedgerChannel) and other.reducer == self.reducer
                and other.snapshot_frequency == self.snapshot_frequency)

    def __hash__(self) -> int:
        return hash((LedgerChannel, self.reducer, self.snapshot_frequency))

    def _twin(self, value: Any, stored: tuple[Ledger, Any] | None) -> Self:
        """This channel holding ``value``, without ``__init__``'s checks or a copy (LangGraph makes several a run)."""
        new = object.__new__(type(self))
        new.key, new.typ, new.reducer, new.deltas = self.key, self.typ, self.reducer, self.deltas
        new.snapshot_frequency, new.value, new._stored = self.snapshot_frequency, value, stored
        return new

    def copy(self) -> Self:
        # Copies serve fresh reads; they share the value, which the reducer never changes in place.
        return self._twin(self.value, self._stored)

    def from_checkpoint(self, checkpoint: Any) -> Self:
        if checkpoint is None or checkpoint is _NOTHING:  # nothing stored yet: empty, as DeltaChannel starts
            return self._twin({}, None)
        if not isinstance(checkpoint, bytes):
            return super().from_checkpoint(checkpoint)
        try:
            value = _serde.loads_typed(("msgpack", zlib.decompress(checkpoint)))
            if isinstance(value, list) and value and value[0] == _COLUMNS:
                value = _from_columns(value)
            if not isinstance(value, dict):
                raise ValueError(f"it holds a {type(value).__name__}, not a dict of records")
        except Exception as exc:  # a damaged checkpoint: say which ledger
            raise StoredDataError(f"ledger {self.key!r} in the checkpoint does not decode "
                                  f"({type(exc).__name__}: {exc})") from exc
        loaded = super().from_checkpoint(value)
        loaded._stored = (value, checkpoint)  # unchanged, it is stored again as it was read
        return loaded

    def checkpoint(self) -> Any:
        """Whole: the ledger as columns, compressed (52 bytes a record against 790), once per change."""
        if self.deltas or not self.is_available():
            return super().checkpoint()
        if self._stored is None or self._stored[0] is not self.value:
            try:
                kind, data = _serde.dumps_typed(_as_columns(self.value) or self.value)
                stored: Any = zlib.compress(data, 1) if kind == "msgpack" else self.value
            except Exception:  # noqa: BLE001 - a record only the saver's own serializer stores: kept plain
                stored = self.value
            self._stored = (self.value, stored)
        return self._stored[1]

    def update(self, values: Sequence[Any]) -> bool:
        if not values:  # LangGraph offers every unwritten channel an empty update, each step
            return False
        checked = []
        for write in values:
            if isinstance(write, dict) and ((len(write) == 1 and _OVERWRITE in write)
                                            or (write.get("type") == _OVERWRITE and "value" in write)):
                write = Overwrite(write[_OVERWRITE] if _OVERWRITE in write else write["value"])
            if isinstance(write, Overwrite):
                if not isinstance(write.value, dict):
                    raise StoredDataError(f"ledger {self.key!r}: Overwrite needs a dict of records "
                                          f"(task id -> record), not a {type(write.value).__name__}; "
                                          "Overwrite({}) empties it")
            elif not write and not self.deltas:
                continue  # an empty write changes nothing: no new version, so no copy of the ledger is stored
            checked.append(write)
        return super().update(checked) if checked else False


# -- A delta ledger is in a checkpoint only at a snapshot, every 50 updates: a thread that stopped delegating
# made every load walk back all checkpoints since (129 ms against 14 ms). So a run after a quiet run writes an
# empty update to its ledger in a hook node the middleware runs anyway: fifty bring a snapshot.


def touch_if_quiet(state: Mapping[str, Any], key: str, tool_names: Collection[str], *,
                   is_turn: Callable[[Any], bool] | None = None) -> dict[str, Any] | None:
    """``{key: {}}`` when ``state`` has a ledger at ``key`` and the previous run called none of ``tool_names``.
    A run begins at a ``HumanMessage`` for which ``is_turn`` (default: any) is true (not a background notice)."""
    ledger = state.get(key)
    if not isinstance(ledger, Mapping) or not ledger:
        return None
    humans = 0
    for message in reversed(state.get("messages") or ()):  # the previous run: between the last two user turns
        if isinstance(message, HumanMessage) and (is_turn is None or is_turn(message)):
            humans += 1
            if humans == 2:
                break
        elif humans == 1 and isinstance(message, AIMessage) and any(
                call.get("name") in tool_names for call in message.tool_calls):
            return None
    return {key: {}}


def saved_value(saver: Any, saved: Any, key: str, channel: BaseChannel[Any, Any, Any]) -> Any:
    """The value of channel ``key`` at ``saved`` (a ``CheckpointTuple`` of ``saver``), or ``None`` if never written;
    ``channel`` is the key's as the graph declares it (a delta one is rebuilt from the nearest snapshot)."""
    if saved is None:
        return None
    values = saved.checkpoint["channel_values"]
    if key in values:
        restored = channel.from_checkpoint(values[key])
        return restored.get() if restored.is_available() else None
    if not isinstance(channel, DeltaChannel) or key not in saved.checkpoint.get("channel_versions", {}):
        return None
    history = saver.get_delta_channel_history(config=saved.config, channels=[key])[key]
    replayed = channel.from_checkpoint(history.get("seed"))  # None: no snapshot yet, as LangGraph's own MISSING
    replayed.replay_writes(history["writes"])
    return replayed.get() if replayed.is_available() else None
