"""One copy rule: a child receives its own deep copy of every shared value, never a reference.

Each value is copied on its own with a fresh memo (``subagents._boundary.own_copies``,
called from one place, ``ChildInput.of``); a value that cannot be copied is left
out and named in the record's ``withheld_keys``. Whatever a child changes in
place, failing or not, alone or beside siblings, the parent's objects and the
caller's own input stay as they were. Run on invoke and ainvoke.
"""

from __future__ import annotations

import ast
import asyncio
import collections
import dataclasses
import datetime
import decimal
import enum
import fractions
import functools
import logging
import signal
import threading
import time
import weakref
import zoneinfo
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents.middleware import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.tools import tool
from pydantic import BaseModel

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.attacks import _parallel, _user
from helpers.background import background  # noqa: F401 - a fixture
from helpers.graphs import records
from subagents._boundary import changed_keys, own_copies

FILLERS = [f"filler_{i}" for i in range(40)]


class Plain:
    def __init__(self, items: list[Any]) -> None:
        self.items = items


@dataclasses.dataclass
class Data:
    items: list[Any]


class Model(BaseModel):
    items: list[Any]


class Slotted:
    __slots__ = ("__hidden", "items")

    def __init__(self, items: list[Any]) -> None:
        self.items = items
        self.__hidden = [len(items)]


def _shared_values() -> dict[str, Any]:
    """Many keys first (the memo bug needed a few), then one value of each kind, each holding ``items``."""
    return {
        **{k: [i, {"n": i}] for i, k in enumerate(FILLERS)},
        "plain": Plain(["orig"]), "data": Data(["orig"]), "model": Model(items=["orig"]),
        "slotted": Slotted(["orig"]), "nested": {"a": {"b": {"items": ["orig"]}}},
    }


KINDS = ["plain", "data", "model", "slotted", "nested"]


def _items(value: Any) -> list[Any]:
    return value["a"]["b"]["items"] if isinstance(value, dict) else value.items


# -- the rule itself ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("before", [0, 1, 3, 7, 40])
def test_a_plain_instance_after_other_keys_is_copied_with_its_own_content(before):
    """A memo shared across keys once gave a later object another's content, or failed and shared it."""
    state = {**{f"k{i}": [i, {"x": [i]}] for i in range(before)}, "plain": Plain(["mine"])}
    copies, withheld = own_copies(state)
    assert withheld == {}
    assert type(copies["plain"]) is Plain and copies["plain"] is not state["plain"]
    assert copies["plain"].items == ["mine"] and copies["plain"].items is not state["plain"].items


def test_every_kind_of_value_is_copied_and_an_unchanged_copy_is_no_change():
    state = _shared_values()
    copies, withheld = own_copies(state)
    assert withheld == {}
    for kind in KINDS:
        assert copies[kind] is not state[kind] and _items(copies[kind]) is not _items(state[kind])
        assert _items(copies[kind]) == ["orig"]
    assert changed_keys(copies, state, frozenset(), copies) == {}
    for kind in KINDS:
        _items(copies[kind]).append("changed")
    assert set(changed_keys(copies, state, frozenset(), copies)) == set(KINDS)
    assert all(_items(state[kind]) == ["orig"] for kind in KINDS)


def test_a_value_that_cannot_be_copied_is_withheld_by_name_never_shared():
    shared = [1, threading.Lock(), 3]
    state = {"a": shared, "b": {"x": shared}, "deep": _deep(100_000), "fine": [1, 2]}
    copies, withheld = own_copies(state)
    assert set(copies) == {"fine"} and copies["fine"] == [1, 2] and copies["fine"] is not state["fine"]
    assert set(withheld) == {"a", "b", "deep"}
    assert "TypeError" in withheld["a"] and "RecursionError" in withheld["deep"]


class _HostileClass:
    @property
    def __class__(self):
        raise RuntimeError("hostile __class__")


class _RaisingMeta(type):
    def __eq__(cls, other):
        raise SystemExit("metaclass __eq__")

    __hash__ = type.__hash__


class _HostileMeta(metaclass=_RaisingMeta):
    pass


@pytest.mark.parametrize("kind", [_HostileClass, _HostileMeta], ids=["__class__", "metaclass __eq__"])
def test_a_value_whose_immutability_check_raises_is_withheld_like_any_other(kind):
    # Asked outside the copy's try, such a value failed every delegation while its key was in the state.
    copies, withheld = own_copies({"odd": kind(), "fine": [1]})
    assert copies == {"fine": [1]} and set(withheld) == {"odd"}


def _mutables(values: Any) -> set[int]:
    """Ids of every list, dict and ``Plain`` reachable from ``values`` (kept alive by ``values``)."""
    seen: set[int] = set()
    stack = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, (list, dict, Plain)) and id(value) not in seen:
            seen.add(id(value))
            stack.extend(value.items if isinstance(value, Plain) else value.values() if isinstance(value, dict)
                         else value)
    return seen


leaves = st.one_of(st.none(), st.integers(), st.text(max_size=4), st.floats(allow_nan=False))
nested = st.recursive(
    leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=3), inner, max_size=4),
                            st.builds(Plain, st.lists(inner, max_size=3))),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(state=st.dictionaries(st.text(min_size=1, max_size=5), nested, max_size=12))
def test_copies_of_random_nested_values_hold_the_same_and_share_nothing_mutable(state):
    copies, withheld = own_copies(state)
    assert withheld == {} and list(copies) == list(state)
    assert changed_keys(copies, state, frozenset(), copies) == {}
    assert not _mutables(copies.values()) & _mutables(state.values())


def test_the_child_input_is_built_and_copied_in_one_place():
    """Every run (``TaskRunner._prepare``) gets its child's input from ``ChildInput.of``: a new caller of the
    pieces goes around the copy rule."""
    root = Path(__file__).resolve().parents[3]
    pieces = {"child_input", "forked_input", "own_copies", "set_up_child"}
    callers: dict[str, set[str]] = {}
    for path in [*root.joinpath("subagents").rglob("*.py"), *root.joinpath("middleware").rglob("*.py"),
                 *root.joinpath("deep_agent").rglob("*.py")]:
        tree = ast.parse(path.read_text())
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                    if name in pieces or (name == "of" and getattr(node.func.value, "id", None) == "ChildInput"):
                        callers.setdefault(str(name), set()).add(f"{path.name}:{func.name}")
    assert callers == {"child_input": {"_boundary.py:of"}, "forked_input": {"_boundary.py:of"},
                       "own_copies": {"_boundary.py:of", "_boundary.py:forked_input"}, "of": {"_runner.py:set_up_child"},
                       "set_up_child": {"_runner.py:_prepare"}}


# -- end to end: children that change what they were given in place ---------------------------------------------


CopyState = TypedDict("CopyState", {  # type: ignore[misc]  # fillers first: the state's order is the schema's
    **{k: NotRequired[list] for k in FILLERS}, **{k: NotRequired[Any] for k in [*KINDS, "lock", "deep"]}},
    total=False)


class _Keys(AgentMiddleware):
    state_schema = CopyState


SEEN: dict[str, list[tuple[bool, bool]]] = {}


@tool
def meddle(job: str, runtime: ToolRuntime) -> str:
    """Changes every shared value in place; fails when the job says so."""
    SEEN.setdefault(job, []).append(("lock" in runtime.state, "deep" in runtime.state))
    for kind in KINDS:
        _items(runtime.state[kind]).append(f"meddled by {job}")
    if job.startswith("fail"):
        raise ValueError("failed after meddling")
    return "meddled"


def _agent(*jobs: str, **kwargs: Any) -> Any:
    model = ScriptedChatModel(
        rules=[(job, [{"tool_calls": [tool_call("meddle", job=job)]}, f"{job} done"]) for job in jobs],
        responses=_parallel(*[(job, "w") for job in jobs]),
    )
    return create_deep_agent(model, [meddle], middleware=[_Keys()], **kwargs,
                             subagents=[{"name": "w", "description": "w", "tools": ["meddle"]}])


@pytest.mark.parametrize("jobs", [("fail",), ("fail 1", "fail 2"), ("a", "b"), ("fail", "b")],
                         ids=["failing", "failing-parallel", "parallel", "failing-beside-one-that-works"])
def test_no_child_changes_the_parents_objects_or_the_callers_input(run, jobs):
    given = _shared_values()
    out = run(_agent(*jobs), {**_user(), **given})
    assert len(records(out)) == len(jobs)
    for kind in KINDS:
        assert _items(given[kind]) == ["orig"], kind  # the caller's own input
        assert out[kind] is given[kind]  # no write-back: failed, or plain keys beside siblings


def test_a_lone_childs_change_lands_by_the_rule_and_the_callers_input_stays_as_it_was(run):
    given = _shared_values()
    out = run(_agent("lone"), {**_user(), **given})
    for kind in KINDS:
        assert _items(out[kind]) == ["orig", "meddled by lone"]
        assert _items(given[kind]) == ["orig"]


def test_a_lone_child_that_changes_nothing_leaves_every_kind_of_the_parents_objects_in_place(run):
    """Its copies hold what the parent's objects hold (no ``__eq__`` needed): nothing to write back."""
    model = ScriptedChatModel(rules=[("idle", ["nothing to do"])], responses=_parallel(("idle", "w")))
    agent = create_deep_agent(model, [meddle], middleware=[_Keys()],
                              subagents=[{"name": "w", "description": "w", "tools": ["meddle"]}])
    given = _shared_values()
    out = run(agent, {**_user(), **given})
    assert all(out[kind] is given[kind] for kind in KINDS)
    assert records(out)[0]["skipped_writes"] is None


def _deep(levels: int) -> list[Any]:
    deep: list[Any] = []
    for _ in range(levels):
        deep = [deep]
    return deep


def test_values_that_cannot_be_copied_never_reach_the_child_and_the_record_names_them(run):
    lock, deep = threading.Lock(), _deep(100_000)
    given = {**_shared_values(), "lock": lock, "deep": deep}
    SEEN.clear()
    out = run(_agent("fail"), {**_user(), **given})
    assert SEEN["fail"] == [(False, False)]
    (record,) = records(out)
    assert set(record["withheld_keys"]) == {"lock", "deep"}
    assert "cannot be copied (TypeError" in record["withheld_keys"]["lock"]
    assert "cannot be copied (RecursionError" in record["withheld_keys"]["deep"]
    assert out["lock"] is lock and out["deep"] is deep and all(_items(given[kind]) == ["orig"] for kind in KINDS)


@pytest.mark.parametrize("artifact", ["lock", "partial"])
def test_a_fork_whose_inherited_conversation_cannot_be_copied_fails_naming_it(run, artifact):
    # The history a fork inherits is copied too: an artifact holding a lock failed the delegation with only
    # "cannot pickle '_thread.lock' object", naming nothing. One holding a functools.partial was copied with
    # the original's bound method in it: forked children appended to the caller's list.
    log: list[str] = []
    held: dict[str, Any] = {"lock": threading.Lock()} if artifact == "lock" else {"hook": functools.partial(log.append)}

    @tool(response_format="content_and_artifact")
    def fetch(x: str) -> tuple[str, dict[str, Any]]:
        """Fetch, with an artifact that holds a lock."""
        return "fetched", held

    child = ScriptedChatModel(default="child done")
    parent = ScriptedChatModel(rules=[("go", [{"tool_calls": [tool_call("fetch", x="1")]},
                                              {"tool_calls": [tool_call("task", description="t", subagent_type="f")]},
                                              "parent done"])])
    specs = [{"name": "f", "description": "Forks.", "model": child, "context": "fork"}]
    (record,) = records(run(create_deep_agent(parent, [fetch], subagents=specs), _user()))
    reason = "(TypeError" if artifact == "lock" else "(its deep copy holds the original builtin_function_or_method"
    assert record["status"] == "error" and f"('messages') cannot be copied {reason}" in record["error"]
    assert child.calls == [] and log == []


def test_a_background_child_never_changes_the_callers_input_either(run, background):
    """A background child runs through the same runner, later, on the background loop."""
    from langchain.agents import create_agent

    from helpers.background import start, started_ids, wait_for
    from subagents.background._local import known_task

    model = ScriptedChatModel(rules=[("PARENT", [start(("fail in the background", "w")), "started"])], default="ok")
    child = ScriptedChatModel(rules=[("fail", [{"tool_calls": [tool_call("meddle", job="fail bg")]}, "done"])])
    middleware = background([{"name": "w", "description": "w", "tools": ["meddle"], "model": child}])
    agent = create_agent(model, [meddle], middleware=[_Keys(), middleware])
    given = _shared_values()
    out = run(agent, {**_user("PARENT"), **given, "lock": threading.Lock()},
              {"configurable": {"thread_id": f"bg-{run}"}})
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: background.status(task_id) == "error")
    assert all(_items(given[kind]) == ["orig"] for kind in KINDS)
    # What it ran without is named in its record, as a task's is (a background record named nothing).
    task = known_task(task_id)
    assert task is not None and set(task.fields.get("withheld_keys") or ()) == {"lock"}


# -- a deep copy that hands back the original is no copy ------------------------------------------------------


class Client:
    """Like many SDK clients: its deep copy is itself."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __deepcopy__(self, memo: dict[int, Any]) -> Client:
        return self


class Colour(enum.Enum):
    RED = 1


def _handler() -> None:
    """A function: deepcopy returns it as it is."""


def test_a_value_whose_deep_copy_is_or_holds_the_original_is_withheld_by_name():
    """``copy.deepcopy`` returns lambdas, loggers and self-copying clients as they are: a child handed one
    changed the parent's and the caller's object."""
    caller: list[str] = []
    state = {"client": Client(), "function": lambda: caller, "logger": logging.getLogger("a.logger"),
             "wrapped": {"inner": [Client()]}, "data": Data([logging.getLogger("b.logger")]), "fine": Plain([1]),
             # what the garbage collector sees they hold: a partial's function, a bound method's object
             "partial": functools.partial(caller.append), "method": caller.append,
             "factory": collections.defaultdict(lambda: caller), "counts": collections.defaultdict(list, a=[1])}
    copies, withheld = own_copies(state)
    assert set(copies) == {"fine", "counts"} and copies["fine"] is not state["fine"]  # list: a built-in class
    assert set(withheld) == {"client", "function", "logger", "wrapped", "data", "partial", "method", "factory"}
    assert withheld["client"] == "cannot be copied (its deep copy is the original Client)"
    assert withheld["wrapped"] == "cannot be copied (its deep copy holds the original Client)"
    assert withheld["data"] == "cannot be copied (its deep copy holds the original Logger)"


class OnceZone(datetime.tzinfo):
    """A zone its library keeps once, as pytz's and dateutil's are: pickled, so deep-copied, as a call back to
    the library's cache (:func:`_once_zone`), which hands back the one zone."""

    def utcoffset(self, dt: datetime.datetime | None) -> datetime.timedelta:
        return datetime.timedelta(hours=2)

    def dst(self, dt: datetime.datetime | None) -> datetime.timedelta:
        return datetime.timedelta(0)

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _once_zone, ()


_ONCE = OnceZone()


def _once_zone() -> OnceZone:
    return _ONCE


def _three_hours(dt: datetime.datetime | None) -> datetime.timedelta:
    return datetime.timedelta(hours=3)


class TableZone(datetime.tzinfo):
    """A zone holding its library's functions in its fields, as dateutil's ``tzfile`` does."""

    def __init__(self) -> None:
        self.find = _three_hours

    def utcoffset(self, dt: datetime.datetime | None) -> datetime.timedelta:
        return self.find(dt)

    def dst(self, dt: datetime.datetime | None) -> datetime.timedelta:
        return datetime.timedelta(0)


def test_datetimes_in_library_zones_and_code_its_module_names_reach_the_child():
    # A datetime in a pytz or dateutil zone, a class and a module's function were withheld from every child.
    once, table = datetime.datetime(2026, 1, 1, tzinfo=_ONCE), datetime.datetime(2026, 1, 1, tzinfo=TableZone())
    copies, withheld = own_copies({"once": [once], "table": {"at": table}, "function": _handler, "cls": Plain})
    assert withheld == {}
    assert copies["once"] == [once] and copies["once"][0].tzinfo is once.tzinfo
    assert copies["table"]["at"].utcoffset() == datetime.timedelta(hours=3)
    assert copies["table"]["at"].tzinfo is not table.tzinfo  # a zone with fields of its own is copied
    assert copies["function"] is _handler and copies["cls"] is Plain


def test_values_immutable_all_the_way_down_are_shared_as_they_are():
    state = {"none": None, "number": decimal.Decimal("1.5"), "ratio": fractions.Fraction(1, 3),
             "when": datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC), "span": datetime.timedelta(1),
             "colour": Colour.RED, "span_of": range(3), "frozen": frozenset({1, "a"}), "pair": (1, ("a", b"b", 2j))}
    copies, withheld = own_copies(state)
    assert withheld == {} and all(copies[key] is value for key, value in state.items())


@tool
def use_client(runtime: ToolRuntime) -> str:
    """Uses the client the state holds, if the child was given one."""
    client = runtime.state.get("client")
    if client is None:
        return "no client"
    client.calls.append("child")
    return "used"


def test_a_child_never_changes_a_client_whose_deep_copy_is_itself(run):
    class _ClientKey(AgentMiddleware):
        state_schema = TypedDict("ClientState", {"client": NotRequired[Any]}, total=False)  # type: ignore[misc]

    model = ScriptedChatModel(rules=[("use", [{"tool_calls": [tool_call("use_client")]}, "used it"])],
                              responses=_parallel(("use", "w")))
    agent = create_deep_agent(model, [use_client], middleware=[_ClientKey()],
                              subagents=[{"name": "w", "description": "w", "tools": ["use_client"]}])
    client = Client()
    out = run(agent, {**_user(), "client": client})
    (record,) = records(out)
    assert client.calls == [] and out["client"] is client
    assert record["withheld_keys"] == {"client": "cannot be copied (its deep copy is the original Client)"}


class LazyNotes:
    """Its deep copy reads the original's items through a closure, as a lazy loader does."""

    def __init__(self) -> None:
        self.items = ["orig"]

    def __deepcopy__(self, memo: dict[int, Any]) -> LazyNotes:
        original, copied = self, object.__new__(LazyNotes)
        copied.load = lambda: original.items  # type: ignore[attr-defined]
        return copied


class ProxiedNotes:
    """Its deep copy keeps a weak proxy to the original's items."""

    def __init__(self) -> None:
        self.items = collections.UserList(["orig"])

    def __deepcopy__(self, memo: dict[int, Any]) -> ProxiedNotes:
        copied = object.__new__(ProxiedNotes)
        copied.items = weakref.proxy(self.items)  # type: ignore[assignment]
        return copied


class MadeClassNotes:
    """Its deep copy is an instance of a class made by the copy, whose class attribute is the original's items."""

    def __init__(self) -> None:
        self.items = ["orig"]

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        made = type("NotesCopy", (), {"items": self.items})
        return made()


class RefusingConfig:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __deepcopy__(self, memo: dict[int, Any]) -> RefusingConfig:
        raise self.error


@tool
def touch_notes(runtime: ToolRuntime) -> str:
    """Adds to the notes the state holds, if the child was given them."""
    for notes in (runtime.state.get("lazy"), runtime.state.get("proxied"), runtime.state.get("made")):
        if notes is not None:
            (notes.load() if hasattr(notes, "load") else notes.items).append("child")
    return "touched"


class _NotesState(TypedDict, total=False):
    lazy: NotRequired[Any]
    proxied: NotRequired[Any]
    made: NotRequired[Any]
    config: NotRequired[Any]


class _NotesKeys(AgentMiddleware):
    state_schema = _NotesState


def _noting_agent() -> Any:
    model = ScriptedChatModel(rules=[("note", [{"tool_calls": [tool_call("touch_notes")]}, "noted"])],
                              responses=_parallel(("note", "w")))
    return create_deep_agent(model, [touch_notes], middleware=[_NotesKeys()],
                             subagents=[{"name": "w", "description": "w", "tools": ["touch_notes"]}])


def test_a_copy_that_reaches_the_original_through_a_closure_a_weak_proxy_or_a_class_it_made_is_withheld(run):
    # The reachability check stopped at functions and classes and never followed a weak reference: the child
    # changed all three.
    lazy, proxied, made = LazyNotes(), ProxiedNotes(), MadeClassNotes()
    (record,) = records(run(_noting_agent(), {**_user(), "lazy": lazy, "proxied": proxied, "made": made}))
    assert lazy.items == ["orig"] and list(proxied.items) == ["orig"] and made.items == ["orig"]
    assert record["withheld_keys"] == {"lazy": "cannot be copied (its deep copy holds the original LazyNotes)",
                                       "proxied": "cannot be copied (its deep copy holds the original UserList)",
                                       "made": "cannot be copied (its deep copy holds the original list)"}


def test_instances_of_classes_made_at_run_time_are_copied_as_data_their_classes_shared():
    local = type("Local", (), {"tags": ["class-wide"]})  # its module does not name it: no code, but shared
    held = local()
    held.items = ["orig"]

    class Fresh:
        def __deepcopy__(self, memo: dict[int, Any]) -> Any:
            return type("FreshCopy", (), {"items": ["its own"]})()  # a class of the copy's, holding its own

    copies, withheld = own_copies({"held": held, "fresh": Fresh(), "cls": local})
    assert withheld == {} and copies["held"].items == ["orig"] and copies["held"].items is not held.items
    assert type(copies["held"]) is local and copies["cls"] is local and copies["fresh"].items == ["its own"]


@pytest.mark.parametrize("error", [SystemExit, asyncio.CancelledError, KeyboardInterrupt])
def test_a_stop_raised_by_a_values_deep_copy_withholds_that_key_and_the_parent_carries_on(run, error):
    # Each was taken for the user's stop: the parent's whole run ended. Copying awaits nothing, so no task's
    # cancellation arrives in it, and no SIGINT handler raised this one (see the test below).
    try:
        out = run(_noting_agent(), {**_user(), "config": RefusingConfig(error("config copy refused"))})
    except (SystemExit, asyncio.CancelledError, KeyboardInterrupt) as exc:
        pytest.fail(f"the parent's run ended: {exc!r}")
    (record,) = records(out)
    assert record["status"] == "completed" and out["messages"][-1].content == "parent carried on"
    assert record["withheld_keys"] == {"config": f"cannot be copied ({error.__name__}: config copy refused)"}


def test_a_keyboard_interrupt_in_a_copy_on_the_main_thread_under_the_default_handler_is_the_users():
    # There Ctrl-C raises it in whatever code runs, a copy's included: it cannot be told from the value's own.
    assert threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            own_copies({"config": RefusingConfig(KeyboardInterrupt())})
    finally:
        signal.signal(signal.SIGINT, previous)


class ShopZone(datetime.tzinfo):
    """A time zone with state, as some libraries' are."""

    def __init__(self) -> None:
        self.hours = 1

    def utcoffset(self, dt: datetime.datetime | None) -> datetime.timedelta:
        return datetime.timedelta(hours=self.hours)

    def dst(self, dt: datetime.datetime | None) -> datetime.timedelta:
        return datetime.timedelta(0)


class SelfCopyZone(ShopZone):
    """A zone whose deep copy is itself by its own ``__deepcopy__``, not its library's cache."""

    def __deepcopy__(self, memo: dict[int, Any]) -> SelfCopyZone:
        return self


class Watched(enum.Enum):
    """A member with a field of its own, besides its (immutable) value."""

    OPEN = 1

    def __init__(self, value: int) -> None:
        self.watchers: list[str] = []


class Tray(list[str], enum.Enum):
    """Its members are lists, whatever their (immutable) values."""

    def __new__(cls, value: int) -> Tray:
        member = list.__new__(cls)
        member._value_ = value
        return member

    def __init__(self, value: int) -> None:
        list.__init__(self)

    EMPTY = 1


class _HeldKey(AgentMiddleware):
    state_schema = TypedDict("HeldState", {"held": NotRequired[Any]}, total=False)  # type: ignore[misc]


@tool
def change_held(runtime: ToolRuntime) -> str:
    """Changes what the shared value holds in place, if the child was given it, then fails."""
    held = runtime.state.get("held")
    if isinstance(held, Watched):
        held.watchers.append("child")
    elif isinstance(held, Tray):
        held.append("child")
    elif isinstance(held, enum.Enum):
        held.value.append("child")
    elif isinstance(held, datetime.datetime):
        held.tzinfo.hours = 9  # type: ignore[union-attr]
    elif held is not None:
        held.buf[:5] = b"child"
    raise ValueError("failed after changing what it was given")


@pytest.mark.parametrize("kind", ["enum member", "enum member's field", "list enum member", "datetime",
                                  "datetime in a self-copying zone", "shared memory"])
def test_a_value_is_shared_as_immutable_only_if_what_it_holds_is_and_a_copy_never_reopens_the_callers(run, kind):
    # An enum member holding a list and a datetime with a time zone of its own were shared as immutable; a
    # SharedMemory's deep copy attaches to the same OS segment again: a failed child changed the caller's.
    # A member of a `list` enum (only its fields were checked) and a datetime in a zone whose own __deepcopy__
    # returns it (taken for one its library keeps once) were shared too.
    model = ScriptedChatModel(rules=[("change", [{"tool_calls": [tool_call("change_held")]}, "done"])],
                              responses=_parallel(("change", "w")))
    agent = create_deep_agent(model, [change_held], middleware=[_HeldKey()],
                              subagents=[{"name": "w", "description": "w", "tools": ["change_held"]}])
    if kind == "shared memory":
        held: Any = shared_memory.SharedMemory(create=True, size=8)
        held.buf[:5] = b"owner"
    elif kind == "enum member's field":
        held = Watched.OPEN
    elif kind == "list enum member":
        held = Tray.EMPTY
    elif kind == "datetime in a self-copying zone":
        held = datetime.datetime(2026, 1, 1, tzinfo=SelfCopyZone())
    else:
        held = enum.Enum("Mode", [("FAST", ["a"])]).FAST if kind == "enum member" else datetime.datetime(
            2026, 1, 1, tzinfo=ShopZone())
    try:
        (record,) = records(run(agent, {**_user(), "held": held}))
        if kind == "enum member":
            assert held.value == ["a"]
            assert record["withheld_keys"] == {"held": "cannot be copied (its deep copy is the original Mode)"}
        elif kind == "enum member's field":
            assert held.watchers == []
            assert record["withheld_keys"] == {"held": "cannot be copied (its deep copy is the original Watched)"}
        elif kind == "list enum member":
            assert held == [] and record["withheld_keys"] == {
                "held": "cannot be copied (its deep copy is the original Tray)"}
        elif kind == "datetime in a self-copying zone":
            assert held.utcoffset() == datetime.timedelta(hours=1) and record["withheld_keys"] == {
                "held": "cannot be copied (its deep copy holds the original SelfCopyZone)"}
        elif kind == "datetime":  # copied, with a time zone of its own
            assert held.utcoffset() == datetime.timedelta(hours=1) and "withheld_keys" not in record
        else:
            assert bytes(held.buf[:5]) == b"owner"
            assert record["withheld_keys"] == {
                "held": "cannot be copied (its deep copy holds mmap, the original's OS resource opened again)"}
    finally:
        if kind == "shared memory":
            held.close()
            held.unlink()


# -- copying is part of the task: inside its timeout_s, and never on the event loop ----------------------------


class Gate:
    """Its deep copy waits until the test opens the gate."""

    def __init__(self) -> None:
        self.open, self.copied = threading.Event(), threading.Event()

    def __deepcopy__(self, memo: dict[int, Any]) -> Gate:
        self.open.wait(5)
        self.copied.set()
        return object.__new__(Gate)


class Rendezvous:
    """Its deep copy waits for the other sibling's to be under way at the same time."""

    def __init__(self) -> None:
        self.both = threading.Barrier(2, timeout=5)

    def __deepcopy__(self, memo: dict[int, Any]) -> Rendezvous:
        self.both.wait()  # broken (so withheld) when the copies run one after another
        return object.__new__(Rendezvous)


def test_copying_counts_inside_timeout_s_and_a_child_whose_deadline_passed_meanwhile_never_starts(run):
    # The copies were made before the task's deadline was set: a slow copy ran past timeout_s unseen.
    child = ScriptedChatModel(default="child answer")
    agent = create_deep_agent(ScriptedChatModel(responses=_parallel(("slow copy", "w"))), middleware=[_HeldKey()],
                              subagents=[{"name": "w", "description": "w", "model": child, "timeout_s": 0.2}])
    gate = Gate()
    try:
        (record,) = records(run(agent, {**_user(), "held": gate}))
    finally:
        gate.open.set()
    assert (record["status"], record["stop_reason"]) == ("error", "timeout")
    assert gate.copied.wait(5)
    time.sleep(0.3)  # room for a child that would start once its copies are made: none does
    assert child.calls == []


def test_parallel_siblings_copy_at_once_never_one_after_another_on_the_event_loop(run):
    # On ainvoke each sibling's copies were made on the event loop, one after another: a slow copy held the
    # loop, and its siblings' deadlines passed meanwhile.
    agent = create_deep_agent(ScriptedChatModel(responses=_parallel(("one", "w"), ("two", "w"))),
                              middleware=[_HeldKey()], subagents=[
                                  {"name": "w", "description": "w", "model": ScriptedChatModel(default="done")}])
    out = run(agent, {**_user(), "held": Rendezvous()})
    assert [(r["status"], r.get("withheld_keys")) for r in records(out)] == [("completed", None)] * 2


def test_a_childs_copies_never_wait_behind_tools_that_outlived_their_children():
    # Copies were made on the pool children's sync tools run on: with it full of tools whose children had
    # timed out, a child with no tools could not copy its input and ended timeout without starting.
    from subagents._boundary import CHILD_TOOL_THREADS

    release = threading.Event()

    @tool
    def stuck(x: str) -> str:
        """Waits until the test ends."""
        release.wait(30)
        return "late"

    stuck_ones = CHILD_TOOL_THREADS._max_workers  # every thread of the pool
    model = ScriptedChatModel(rules=[("stuck", [{"tool_calls": [tool_call("stuck", x="1")]}, "never"]),
                                     ("plain", ["plain answer"])],
                              responses=[_parallel(*[(f"stuck {i}", "s") for i in range(stuck_ones)])[0],
                                         *_parallel(("plain", "p"))])
    agent = create_deep_agent(model, [stuck], subagents=[
        {"name": "s", "description": "s", "tools": ["stuck"], "timeout_s": 0.5},
        {"name": "p", "description": "p", "tools": [], "timeout_s": 5}])
    try:
        out = asyncio.run(agent.ainvoke(_user()))
    finally:
        release.set()
    plain = [r for r in records(out) if r["agent_type"] == "p"]
    assert [(r["status"], r["result"]) for r in plain] == [("completed", "plain answer")], plain


# -- a value that cannot be compared is a change, whatever it raises -----------------------------------------------


class Uncomparable(BaseException):
    """Not an Exception: what a hostile ``__eq__`` may raise."""


class EqRaises:
    def __init__(self) -> None:
        self.items = [1]

    def __eq__(self, other: object) -> bool:
        raise Uncomparable("cannot compare")

    __hash__ = object.__hash__


def test_a_child_that_never_touched_an_uncomparable_value_completes(run):
    """A shared value whose ``__eq__`` raised a BaseException ended an idle child with ``error``."""
    model = ScriptedChatModel(rules=[("idle", ["nothing to do"])], responses=_parallel(("idle", "w")))
    agent = create_deep_agent(model, [meddle], middleware=[_Keys()],
                              subagents=[{"name": "w", "description": "w", "tools": ["meddle"]}])
    out = run(agent, {**_user(), "plain": EqRaises()})
    (record,) = records(out)
    assert record["stop_reason"] == "completed" and out["messages"][-1].content == "parent carried on"


class LendingZone(ShopZone):
    """A zone whose ``__getattribute__`` lends a ``__deepcopy__`` giving itself (the ``__getattr__`` rule dodged)."""

    def __getattribute__(self, name: str) -> Any:
        if name == "__deepcopy__":
            return lambda memo: self
        return object.__getattribute__(self, name)


def test_a_zone_lending_itself_as_its_copy_through_getattribute_is_not_shared():
    # The zone (and its state) reached the child as the caller's own object, nothing withheld or named.
    zone = LendingZone()
    copies, withheld = own_copies({"held": datetime.datetime(2026, 1, 1, tzinfo=zone)})
    assert "held" in withheld and "held" not in copies, (copies, withheld)


class NotedZone(zoneinfo.ZoneInfo):
    """A ``ZoneInfo`` subclass: kept once per key as ``ZoneInfo`` is, and given a field of the caller's."""


class KeptZone(ShopZone):
    """A zone with a field, kept once by its own ``__reduce__``: its deep copy is itself."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _kept_zone, ()


_KEPT = KeptZone()


def _kept_zone() -> KeptZone:
    return _KEPT


@pytest.mark.parametrize("kind", ["ZoneInfo subclass", "own __reduce__"])
def test_a_zone_kept_once_that_holds_fields_of_its_own_is_not_shared(kind):
    # Its deep copy is itself, so it was taken for one its library keeps: the child got the caller's zone, and
    # could change its fields (a list appended to, an offset changed).
    zone: Any = _KEPT
    if kind == "ZoneInfo subclass":
        zone = NotedZone("UTC")
        zone.notes = []
    copies, withheld = own_copies({"held": [datetime.datetime(2026, 1, 1, tzinfo=zone)]})
    assert "held" not in copies
    assert withheld == {"held": f"cannot be copied (its deep copy holds the original {type(zone).__name__})"}


REGISTRY: dict[str, Any] = {"accounts": ["alice"]}


class LiveHandle:
    """A handle whose deep copy is the live registry the parent also holds under another key."""

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return REGISTRY


class CachedAccount:
    """Rebuilt through a module cache on copy (``__reduce__``): the copy holds the cache's object."""

    def __reduce__(self) -> Any:
        return (CachedAccount._cached, ())

    @staticmethod
    def _cached() -> Any:
        return {"cached": REGISTRY["accounts"]}


@pytest.mark.parametrize("value", [LiveHandle(), CachedAccount()], ids=["deepcopy", "reduce"])
def test_a_copy_holding_another_keys_original_is_withheld(value):
    # Each copy was checked against its own key's original only: a copy handing back the object the parent
    # holds under another key reached the child, which changed the parent's registry in place.
    given, withheld = own_copies({"a": REGISTRY, "b": value})
    assert set(given) == {"a"} and given["a"] is not REGISTRY and given["a"] == REGISTRY
    assert withheld == {"b": f"cannot be copied (its deep copy holds the original {'dict' if isinstance(value, LiveHandle) else 'list'})"}


def test_a_forks_inherited_history_holding_another_keys_original_fails_naming_it():
    # The history a fork inherits was checked against its own objects only: an artifact whose copy hands back the
    # object the state holds under another key reached the child (each check saw only its own originals).
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from subagents._boundary import ChildInput
    from subagents._errors import SubagentsError

    accounts = {"accounts": ["alice"]}
    # Its copy is ``accounts``, found by its class (as a registry lookup would be), not held by the artifact.
    artifact = type("Hands", (), {"__deepcopy__": lambda self, memo: accounts})()
    history = [HumanMessage("go"), AIMessage("", tool_calls=[{"id": "f1", "name": "fetch", "args": {}}]),
               ToolMessage("fetched", tool_call_id="f1", artifact=artifact),
               AIMessage("", tool_calls=[{"id": "t1", "name": "task", "args": {}}])]
    with pytest.raises(SubagentsError, match=r"\('messages'\) cannot be copied \(its deep copy holds the original"):
        ChildInput.of({"messages": history, "a": accounts}, "go", frozenset(), fork=True, tool_call_id="t1")


class SharesItsDict:
    """A ``__deepcopy__`` that hands its copy the original's ``__dict__``: never asked for before the copy, that
    dict did not exist (the attributes lived inline), so no walk of the original could know it."""

    def __init__(self) -> None:
        self.n = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> SharesItsDict:
        new = SharesItsDict.__new__(SharesItsDict)
        new.__dict__ = self.__dict__
        return new


@pytest.mark.parametrize("before", [0, 3])
def test_a_copy_handed_the_originals_attributes_is_withheld_never_shared(before):
    state = {**{f"k{i}": [i] for i in range(before)}, "counter": SharesItsDict()}
    copies, withheld = own_copies(state)
    assert withheld == {"counter": "cannot be copied (its deep copy holds the original dict)"}
    assert set(copies) == set(state) - {"counter"}
