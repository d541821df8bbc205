"""``list_async_tasks`` stays bounded however many tasks a thread ever started, and pages reach them all."""

from __future__ import annotations

import json
import re

from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.background import background, ledger, start, started_ids  # noqa: F401 - the fixture
from helpers.graphs import tool_messages, user
from middleware._background import DEFAULT_LIST_TOTAL_CHARS, listed
from subagents._settings import DelegationSettings

TASKS = 200


def _rec(i: int) -> dict[str, object]:
    return {"id": f"task{i:04d}", "agent_type": "general-purpose", "runner": "local", "status": "completed",
            "description": f"job {i}: " + "d" * 200, "created_at": float(i), "result": "ok", "announced": True,
            "note": "n" * 100 if i % 3 == 0 else None}


def _page_ids(text: str) -> list[str]:
    return [row["task_id"] for row in json.loads(text.split("\n", 1)[0])]


def _next_offset(text: str) -> int | None:
    found = re.search(r"offset=(\d+)", text.split("\n", 1)[-1]) if "\n" in text else None
    return int(found.group(1)) if found else None


def test_a_list_of_many_tasks_is_capped_newest_first_and_pages_reach_all(background):
    records = {r["id"]: r for r in map(_rec, range(TASKS))}
    model = ScriptedChatModel(
        rules=[("PARENT list", [lambda m: {"tool_calls": [tool_call("list_async_tasks", **_args(m))]}])],
        default="ok",
    )
    agent = create_agent(model, middleware=[background(settings=DelegationSettings.of(notify=False))], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "list-cap"}}
    agent.update_state(config, {"messages": [{"role": "user", "content": "hi"}], "async_tasks": records})
    seen: list[str] = []
    pages = 0
    while True:
        out = agent.invoke(user("PARENT list"), config)
        text = tool_messages(out)[-1].text
        pages += 1
        assert len(text) <= DEFAULT_LIST_TOTAL_CHARS
        seen += _page_ids(text)
        if _next_offset(text) is None:
            break
        assert "older not shown" in text and f"of {TASKS}" in text
        assert pages < TASKS
    assert seen == [f"task{i:04d}" for i in reversed(range(TASKS))]  # newest first, each once
    assert pages >= TASKS // 50


def _args(messages: list[object]) -> dict[str, int]:
    """The offset the last list answer named, so the scripted parent pages as a model would."""
    for message in reversed(messages):
        if getattr(message, "type", None) == "tool":
            offset = _next_offset(message.text)
            return {"offset": offset} if offset is not None else {}
    return {}


def test_limit_and_status_narrow_the_page():
    records = [_rec(i) for i in range(10)]
    assert _page_ids(listed(records, None, 0, 3)) == ["task0009", "task0008", "task0007"]
    assert _next_offset(listed(records, None, 0, 3)) == 3
    assert _page_ids(listed(records, None, 9, 3)) == ["task0000"]
    assert listed(records, None, 10, 3) == "No background tasks from offset 10: there are 10."


def test_the_start_turns_confirmations_stay_short(background):
    model = ScriptedChatModel(
        rules=[("job", ["done"]), ("PARENT start", [start(*[(f"job {i}", "general-purpose") for i in range(50)]),
                                                     "started"])],
        default="ok",
    )
    agent = create_agent(model, middleware=[background(settings=DelegationSettings.of(notify=False, max_background_tasks=50))],
                         checkpointer=InMemorySaver())
    out = agent.invoke(user("PARENT start"), {"configurable": {"thread_id": "short-starts"}})
    confirmations = [m.text for m in tool_messages(out) if m.text.startswith("Started background task")]
    assert len(confirmations) == 50 and len(started_ids(out["messages"])) == 50
    # Besides the task id and type, under 60 characters (they were about 90: 27,800 for 200 starts).
    assert all(len(text) - len(task_id) - len("general-purpose") < 60
               for text, task_id in zip(confirmations, started_ids(out["messages"]), strict=True)), confirmations[0]
    assert len(ledger(out)) == 50
