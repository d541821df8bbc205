"""Damaged ``async_tasks`` records: clear errors where a caller hands them in, no crash where state holds them.

A ledger can be edited by hand (``update_state``, ``Overwrite``, a JSON file
read back). Waiting refuses a record it cannot wait for, naming the task id
and the field; the middleware leaves such a record in state as it is and
does not poll, announce or list it; the reducer refuses an update that is
not a mapping of fields.
"""

from __future__ import annotations

import asyncio

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Overwrite

from helpers.background import as_json, background, ledger, notices, start, started_ids, wait_for
from helpers.graphs import tool_messages, user
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import wait_for_background
from subagents.background import merge_async_records
from subagents._settings import DelegationSettings

GOOD = {"id": "t1", "agent_type": "w", "runner": "remote", "status": "running", "thread_id": "th", "run_id": "r"}


@pytest.mark.parametrize(
    ("ledger_value", "named"),
    [
        ({"t1": "oops"}, r"'t1'.*str, not a mapping"),
        ({"t1": None}, r"'t1'.*NoneType, not a mapping"),
        ({"t1": {**GOOD, "id": None}}, r"'t1'.*field 'id'"),
        ({"t1": {k: v for k, v in GOOD.items() if k != "id"}}, r"'t1'.*field 'id'"),
        ({"t1": {**GOOD, "id": "other"}}, r"'t1'.*field 'id' is 'other'"),
        ({"t1": {**GOOD, "agent_type": None}}, r"'t1'.*field 'agent_type'"),
        ({"t1": {**GOOD, "runner": "alien"}}, r"'t1'.*field 'runner' is 'alien'"),  # would skip the owner check
        ({"t1": {k: v for k, v in GOOD.items() if k != "runner"}}, r"'t1'.*field 'runner' is None"),
        ({"t1": {**GOOD, "thread_id": 7}}, r"'t1'.*field 'thread_id'"),
        ({"t1": {**GOOD, "status": ["running"]}}, r"'t1'.*field 'status'"),
        ({"t1": {k: v for k, v in GOOD.items() if k != "status"}}, r"'t1'.*field 'status'"),
        ([GOOD], r"ledger must be the async_tasks mapping.*list"),
        ("t1", r"ledger must be the async_tasks mapping.*str"),
    ],
)
def test_waiting_refuses_a_record_it_cannot_wait_for_naming_the_task_and_field(ledger_value, named):
    with pytest.raises(ValueError, match=r"wait_for_background: .*" + named):
        wait_for_background(ledger_value, timeout_s=0.2)


def test_waiting_on_no_ledger_or_settled_records_returns_at_once():
    assert wait_for_background(None, timeout_s=0.2) is True
    assert wait_for_background({}, timeout_s=0.2) is True
    # A settled remote task needs no thread to be polled by.
    settled = {"t1": {**GOOD, "status": "completed", "thread_id": None}}
    assert wait_for_background(settled, timeout_s=0.2) is True


def test_the_reducer_refuses_an_update_that_is_not_fields_and_replaces_a_damaged_record():
    with pytest.raises(ValueError, match=r"async_tasks: the update for task 'bad' is a str"):
        merge_async_records({}, {"bad": "oops"})
    with pytest.raises(ValueError, match=r"async_tasks: the update for task 'bad' is a list"):
        merge_async_records({"t1": dict(GOOD)}, {"bad": ["x"]})
    merged = merge_async_records({"t1": "oops", "t2": dict(GOOD)}, {"t1": {"status": "lost"}})
    assert merged == {"t1": {"status": "lost"}, "t2": GOOD}


def _agent(background):
    model = ScriptedChatModel(
        rules=[
            ("quick job", ["quick answer"]),
            ("PARENT start", [start(("quick job", "general-purpose")), "started"]),
            ("PARENT look", [{"tool_calls": [tool_call("list_async_tasks"),
                                             tool_call("check_async_task", task_id="hand"),
                                             tool_call("cancel_async_task", task_id="junk")]}, "looked"]),
            ("PARENT again", [lambda m: {"tool_calls": [tool_call("check_async_task",
                                                                  task_id=started_ids(m)[0])]}, "done"]),
        ],
        default="ok",
    )
    # Without notices, so every scripted turn below is the parent's own.
    return create_agent(model, middleware=[background(settings=DelegationSettings.of(notify=False))], checkpointer=InMemorySaver())


DAMAGED = {
    "hand": {"id": "hand", "runner": "remote", "status": "running"},  # no agent_type, no thread_id
    "wrong": {"id": "not-wrong", "agent_type": "general-purpose", "runner": "local", "status": "completed"},
}


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_damaged_records_in_state_never_stop_the_parent_and_stay_as_they_are(background, mode):
    agent = _agent(background)
    config = {"configurable": {"thread_id": f"damage-{mode}"}}

    def turn(text):
        if mode == "invoke":
            return agent.invoke(user(text), config)
        return asyncio.run(agent.ainvoke(user(text), config))

    out = turn("PARENT start")
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: background.status(task_id) == "completed")
    agent.update_state(config, {"async_tasks": DAMAGED})
    # Overwrite skips the reducer: a record that is not even a mapping reaches state this way.
    agent.update_state(config, {"async_tasks": Overwrite({**ledger(agent.get_state(config).values),
                                                          "junk": "not a record"})})

    out = turn("PARENT look")
    listed, checked, cancelled = tool_messages(out)[-3:]
    rows = as_json(listed)
    assert [r["task_id"] for r in rows] == [task_id]
    assert checked.status == "error" and "'hand' cannot be acted on" in checked.text
    assert "field 'agent_type'" in checked.text
    assert cancelled.status == "error" and "'junk'" in cancelled.text and "not a mapping" in cancelled.text

    out = turn("PARENT again")
    assert as_json(tool_messages(out)[-1])["status"] == "completed"
    kept = ledger(agent.get_state(config).values)
    assert kept["hand"] == DAMAGED["hand"] and kept["wrong"] == DAMAGED["wrong"] and kept["junk"] == "not a record"


def test_a_damaged_finished_record_is_not_announced_and_a_good_one_still_is(background):
    model = ScriptedChatModel(
        rules=[("quick job", ["quick answer"]), ("PARENT start", [start(("quick job", "general-purpose")), "started"])],
        default="ok",
    )
    agent = create_agent(model, middleware=[background()], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "damage-notice"}}
    out = agent.invoke(user("PARENT start"), config)
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: background.status(task_id) == "completed")
    agent.update_state(config, {"async_tasks": {"wrong": {**DAMAGED["wrong"], "result": "SECRET"}}})
    out = agent.invoke(user("anything new?"), config)
    (announced,) = notices(out)
    assert task_id in announced and "quick answer" in announced
    assert "wrong" not in announced and "SECRET" not in announced


def _rec(task_id, **fields):
    record = {"id": task_id, "agent_type": "general-purpose", "runner": "local", "status": "completed",
              "description": "d", "created_at": 1.0, "result": "ok", "announced": False}
    record.update(fields)
    return record


HOSTILE = {
    "int-result": _rec("int-result", result=123),
    "int-error": _rec("int-error", status="error", result=None, error=5),
    "dict-result": _rec("dict-result", result={str(i): i for i in range(50)}),
    "int-description": _rec("int-description", description=5, announced=True),
    "str-time": _rec("str-time", created_at="x", announced=True),
    "list-note": _rec("list-note", note=["x"], announced=True),
    "superscript-owner": _rec("superscript-owner", status="running", owner="local:h:\u00b2:s:r", announced=True),
    "huge-pid-owner": _rec("huge-pid-owner", status="running", owner="local:h:99999999999999999999:s:r",
                           announced=True),
}


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_hostile_field_values_never_stop_a_turn_a_notice_or_a_listing(background, mode):
    model = ScriptedChatModel(
        rules=[("PARENT list", [{"tool_calls": [tool_call("list_async_tasks"),
                                                tool_call("check_async_task", task_id="zz")]}, "listed"])],
        default="ok",
    )
    agent = create_agent(model, middleware=[background()], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"hostile-{mode}"}}
    good = _rec("good", created_at=2.0, announced=True)
    agent.update_state(config, {"messages": [{"role": "user", "content": "hi"}],
                                "async_tasks": {**HOSTILE, "good": good, 7: _rec(7, announced=True)}})
    turn = (lambda text: agent.invoke(user(text), config)) if mode == "invoke" else (
        lambda text: asyncio.run(agent.ainvoke(user(text), config)))
    out = turn("anything new?")
    assert out["messages"][-1].text == "ok" and notices(out) == []  # the damaged ones are never announced
    out = turn("PARENT list")
    listed, checked = tool_messages(out)[-2:]
    assert [r["task_id"] for r in as_json(listed)] == ["good", "superscript-owner", "huge-pid-owner"]  # newest first
    assert "Known task ids: superscript-owner, huge-pid-owner, good." in checked.text
    # A running task whose owner names no process this host could run is lost, as any gone owner's.
    kept = ledger(agent.get_state(config).values)
    assert kept["superscript-owner"]["status"] == kept["huge-pid-owner"]["status"] == "lost"
    assert kept["int-result"] == HOSTILE["int-result"] and kept[7]["id"] == 7


def test_the_ledger_refuses_a_whole_value_that_is_not_a_mapping_with_a_clear_error():
    for left, right, named in [({}, ["x"], "the update is a list"), ({}, "abc", "the update is a str"),
                               (5, {"t": {}}, "the ledger is a int"), (["x"], {"t": {}}, "the ledger is a list")]:
        with pytest.raises(ValueError, match=f"async_tasks: {named}"):
            merge_async_records(left, right)
    agent = create_agent(ScriptedChatModel(default="ok"), middleware=[_middleware()], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "whole"}}
    agent.update_state(config, {"messages": [{"role": "user", "content": "hi"}]})
    for value in (5, None, ["x"], "abc"):
        with pytest.raises(ValueError, match=r"ledger 'async_tasks': Overwrite needs a dict of records"):
            agent.update_state(config, {"async_tasks": Overwrite(value)})
    with pytest.raises(ValueError, match=r"async_tasks: the update is a list"):
        agent.update_state(config, {"async_tasks": ["x"]})
    agent.update_state(config, {"async_tasks": Overwrite({})})
    assert ledger(agent.get_state(config).values) == {}


@pytest.mark.parametrize(("argument", "value"), [("timeout_s", None), ("timeout_s", "1"), ("timeout_s", True),
                                                 ("every_s", None), ("every_s", "0.1")])
def test_waiting_refuses_a_deadline_or_interval_that_is_not_seconds_naming_it(argument, value):
    with pytest.raises(ValueError, match=f"wait_for_background: {argument}"):
        wait_for_background({}, **{argument: value})


_made: list = []


def _middleware():
    from middleware import BackgroundSubagentMiddleware

    middleware = BackgroundSubagentMiddleware(settings=DelegationSettings.of(notify=False))
    _made.append(middleware)
    return middleware


@pytest.fixture(autouse=True)
def _close_made():
    yield
    while _made:
        _made.pop().close()


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_an_approval_request_json_cannot_hold_is_announced_as_text_and_a_malformed_one_is_damage(background, mode):
    model = ScriptedChatModel(
        rules=[("PARENT check", [{"tool_calls": [tool_call("check_async_task", task_id="odd"),
                                                 tool_call("check_async_task", task_id="flat")]}, "checked"])],
        default="ok",
    )
    agent = create_agent(model, middleware=[background()], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"odd-request-{mode}"}}
    # Owned by a process on another host: kept as it stands, so it is announced as it was written.
    waiting = {"status": "waiting_for_approval", "result": None, "owner": "local:another-host:4242:x:r1"}
    odd = _rec("odd", **waiting, approval_request=[{"id": "i1", "value": {(1, 2): "which?", b"raw": 1}}])
    flat = _rec("flat", **waiting, approval_request="publish?")
    agent.update_state(config, {"messages": [{"role": "user", "content": "hi"}],
                                "async_tasks": {"odd": odd, "flat": flat}})
    turn = (lambda text: agent.invoke(user(text), config)) if mode == "invoke" else (
        lambda text: asyncio.run(agent.ainvoke(user(text), config)))
    out = turn("anything new?")
    (notice,) = notices(out)
    assert "odd (general-purpose): waiting_for_approval" in notice and "which?" in notice and "(1, 2)" in notice
    assert "flat" not in notice
    out = turn("PARENT check")
    odd_view, flat_view = tool_messages(out)[-2:]
    assert "which?" in odd_view.text and odd_view.status != "error"
    assert flat_view.status == "error" and "field 'approval_request' is a str" in flat_view.text


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize(("field", "value", "tool"), [
    ("attempt", 2**64 - 1, "retry_async_task"), ("attempt", 1e308, "retry_async_task"),
    ("attempt", -1, "retry_async_task"), ("turns", 2**64 - 1, "update_async_task"),
])
def test_a_count_one_more_of_which_no_checkpoint_holds_is_refused_before_anything_runs(background, mode, field,
                                                                                      value, tool):
    args = {"message": "and again"} if tool == "update_async_task" else {}
    model = ScriptedChatModel(
        rules=[("the job", ["child ran again"]),
               ("PARENT act", [{"tool_calls": [tool_call(tool, task_id="t1", **args)]}, "acted"])],
        default="ok",
    )
    middleware = background()
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"count-{mode}-{field}-{tool}"}}
    status = "error" if tool == "retry_async_task" else "completed"
    agent.update_state(config, {"messages": [{"role": "user", "content": "hi"}], "async_tasks": {
        "t1": _rec("t1", status=status, description="the job", announced=True, **{field: value})}})
    turn = (lambda text: agent.invoke(user(text), config)) if mode == "invoke" else (
        lambda text: asyncio.run(agent.ainvoke(user(text), config)))
    out = turn("PARENT act")  # the turn ends normally
    refused = tool_messages(out)[-1]
    assert refused.status == "error" and f"field '{field}' is {value!r}, not a count" in refused.text
    assert middleware.runtime.table.get("t1") is None  # nothing was launched
