"""How what a child changed lands in the parent's state: the write-back rule.

For each key the child changed (never an excluded or private key):

* **reducer keys** (the parent's channel has a reducer, e.g.
  ``Annotated[list, operator.add]``): the child's own contribution is written,
  never its whole final value -- the items it appended to a list, the entries
  it added or changed in a dict, the members it added to a set. A change that
  cannot be expressed that way (the child replaced the list) is not written.
  Parallel siblings' contributions all land, through the reducer.
* **plain keys** (no reducer): the final value is written only when the
  ``task`` call has no parallel ``task`` sibling in the same model message;
  with siblings, two writes would be invalid, so none is written.
* keys the parent's state does not have are not written.

Every key not written is reported in the record's ``skipped_writes`` with the
reason. Each candidate write is tried on a copy of the parent's channel
first, so a value the parent's reducer rejects is skipped, never a crash.

Example::

    update, skipped = write_back(outcome.changes, outcome.inputs, channels, parallel=True)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from subagents._errors import is_real_cancellation, safe_text

_MISSING = object()

PARALLEL_PLAIN_KEY = (
    "no reducer, and the task call had parallel task siblings: only a lone task call "
    "writes back keys without a reducer"
)


def parent_channels(config: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The parent's state channels for the running task, or ``None`` when they cannot be seen.

    LangGraph hands each task a reader bound to the graph's channels; they
    tell which keys exist and which have reducers. Read-only use.
    """
    from langgraph.constants import CONF

    try:
        from langgraph._internal._constants import CONFIG_KEY_READ

        read = (config.get(CONF) or {}).get(CONFIG_KEY_READ)
        args: tuple[Any, ...] = tuple(getattr(read, "args", ()))
        channels = args[1]
    except Exception:  # noqa: BLE001 - unknown LangGraph internals: fall back to the safe rule
        return None
    return channels if isinstance(channels, Mapping) else None


def write_back(
    changes: Mapping[str, Any],
    inputs: Mapping[str, Any],
    channels: Mapping[str, Any] | None,
    *,
    parallel: bool,
    earlier: Mapping[str, list[Any]] | None = None,
    checkpointed: bool = False,
) -> tuple[dict[str, Any], dict[str, str]]:
    """``(update, skipped)``: what to write into the parent, and what not, with why.

    With ``channels=None`` every key is treated as plain (no reducer).
    ``earlier`` holds what parallel siblings already wrote to each key in
    this step: a write is tried on top of theirs, so no combination of
    siblings can make the parent's reducer fail. With ``checkpointed`` a
    value must also survive the checkpointer's serializer.
    """
    update: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for key, value in changes.items():
        try:
            reason = _one(key, value, inputs, channels, parallel, update, (earlier or {}).get(key, []),
                          checkpointed)
        except BaseException as exc:  # noqa: BLE001 - a hostile value is skipped, never a crash
            if is_real_cancellation(exc):
                raise
            reason = f"could not be compared or copied ({_name(exc)})"
        if reason is not None:
            skipped[safe_text(key, 200)] = reason
    return update, skipped


def _one(key: str, value: Any, inputs: Mapping[str, Any], channels: Mapping[str, Any] | None,
         parallel: bool, update: dict[str, Any], earlier: list[Any], checkpointed: bool) -> str | None:
    channel = None
    if channels is not None:
        channel = channels.get(key)
        if channel is None:
            return "the parent's state has no such key"
    if channel is not None and is_reducer(channel):
        before = inputs.get(key, _MISSING)
        delta = contribution(before, value)
        if delta is _MISSING:
            return "the child replaced a value that has a reducer; only additions can be written back"
        removed = _removed(before, value)
        if removed:
            update[key] = delta
            return f"entries removed by the child cannot be written back through a reducer: {removed}"
    else:
        if parallel:
            return PARALLEL_PLAIN_KEY
        delta = value
    problem = _unusable(delta, checkpointed)
    if problem is not None:
        return problem
    if channel is not None and not _accepts(channel, [*earlier, delta]):
        return "the parent's channel rejected the value" + (" together with a parallel sibling's" if earlier else "")
    update[key] = delta
    return None


def _removed(before: Any, after: Any) -> str:
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        gone = [safe_text(k, 60) for k in before if k not in after]
        return ", ".join(gone[:10]) + (" ..." if len(gone) > 10 else "")
    return ""


def _unusable(value: Any, checkpointed: bool) -> str | None:
    """Why the parent could not carry ``value`` (LangGraph deep-copies a tool's update), if it cannot."""
    try:
        copy.deepcopy(value)
    except BaseException as exc:  # noqa: BLE001 - any type: a value whose copy raises is skipped
        if is_real_cancellation(exc):
            raise
        return f"the value cannot be copied ({_name(exc)})"
    if checkpointed:
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

        try:
            JsonPlusSerializer().dumps_typed(value)
        except BaseException as exc:  # noqa: BLE001
            if is_real_cancellation(exc):
                raise
            return f"the parent's checkpointer cannot store the value ({_name(exc)})"
    return None


def _name(exc: BaseException) -> str:
    try:
        return str(type(exc).__name__)
    except BaseException:  # noqa: BLE001
        return "an error"


def is_reducer(channel: Any) -> bool:
    from langgraph.channels import BinaryOperatorAggregate, Topic

    return isinstance(channel, (BinaryOperatorAggregate, Topic))


def contribution(before: Any, after: Any) -> Any:
    """What the child added to a reducer value, or ``_MISSING`` when it is not an addition."""
    if before is _MISSING or before is None:
        return after
    if isinstance(before, list) and isinstance(after, list):
        head = after[: len(before)]
        if len(head) == len(before) and all(a is b or a == b for a, b in zip(head, before, strict=True)):
            return after[len(before):]
        return _MISSING
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        return {k: v for k, v in after.items() if k not in before or not _same(before[k], v)}
    if isinstance(before, (set, frozenset)) and isinstance(after, (set, frozenset)):
        return type(after)(after - before) if before <= after else _MISSING
    return _MISSING


def _same(a: Any, b: Any) -> bool:
    return a is b or bool((a == b) is True)


def _accepts(channel: Any, values: list[Any]) -> bool:
    try:
        trial = channel.copy()
        if hasattr(trial, "value"):
            # A reducer that mutates in place must not touch the parent's real value.
            trial.value = copy.copy(trial.value)
        trial.update(values)
    except BaseException as exc:  # noqa: BLE001 - the reducer or type check refused it, with any type
        if is_real_cancellation(exc):
            raise
        return False
    return True
