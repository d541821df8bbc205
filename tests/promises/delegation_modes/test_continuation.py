"""Short-answer continuation: opt-in, configurable, never turns success into failure."""

from __future__ import annotations

from helpers.graphs import records, tool_messages, user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents._outcome import CONTINUATION_PROMPT
from subagents._settings import DelegationSettings

FULL = "Full report:" + " details" * 40


def model_with(continuation_reply):
    return ScriptedChatModel(
        rules=[("brief job", ["ok"]), (CONTINUATION_PROMPT, [continuation_reply])],
        responses=[{"tool_calls": [tool_call("task", description="brief job", subagent_type="general-purpose")]},
                   "parent done"],
    )


def test_short_answer_gets_one_continuation_and_the_longer_answer_wins(run):
    model = model_with(FULL)
    out = run(create_deep_agent(model, settings=DelegationSettings.of(short_answer_threshold=200)), user("go"))
    assert tool_messages(out)[0].content == FULL
    (record,) = records(out)
    # The ledger keeps a preview and the full length; the full answer is the ToolMessage above.
    assert record["model_calls"] == 2 and record["result_chars"] == len(FULL)
    assert FULL.startswith(record["result"].removesuffix("…")) and len(record["result"]) <= 200
    child = [c for c in model.calls if any(m.text == "brief job" for m in c["messages"])]
    assert [m.text for m in child[-1]["messages"] if m.type == "human"] == ["brief job", CONTINUATION_PROMPT]


def test_continuation_is_off_by_default(run):
    out = run(create_deep_agent(model_with(FULL)), user("go"))
    assert tool_messages(out)[0].content == "ok"
    assert records(out)[0]["model_calls"] == 1


def test_threshold_zero_turns_continuation_off(run):
    model = model_with(FULL)
    out = run(create_deep_agent(model, settings=DelegationSettings.of(short_answer_threshold=0)), user("go"))
    assert tool_messages(out)[0].content == "ok"
    assert records(out)[0]["model_calls"] == 1


def test_threshold_is_configurable(run):
    out = run(create_deep_agent(model_with(FULL), settings=DelegationSettings.of(short_answer_threshold=2)), user("go"))
    assert tool_messages(out)[0].content == "ok"


def test_failed_continuation_returns_the_first_answer_with_a_note(run):
    out = run(create_deep_agent(model_with(ConnectionError("rate limited")), settings=DelegationSettings.of(
        short_answer_threshold=200,
    )), user("go"))
    (msg,) = tool_messages(out)
    assert msg.status == "success"
    assert msg.content.startswith("ok\n\n[note: the request for a fuller report failed:")
    assert "rate limited" in msg.content
    assert records(out)[0]["status"] == "completed"
