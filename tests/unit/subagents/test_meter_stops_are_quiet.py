"""A child stopped by its meter (max_turns, a budget) is a record, not a "callback error" on stderr.

The meter stops a child by raising from a LangChain callback; LangChain logs
each such exception as a warning before re-raising it, which printed
``Error in RecordingMeter.on_chat_model_start callback: MaxTurnsReached(...)``
once per stopped child (the bench's budget measure showed a screenful).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from helpers.graphs import echo, parent_script, records, tool_messages, user
from langchain_core.callbacks import BaseCallbackHandler

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import Budget, DelegationSettings

CALLBACK_LOGGER = "langchain_core.callbacks.manager"


def _looping(*calls: tuple[str, str]) -> ScriptedChatModel:
    return ScriptedChatModel(rules=[("go", parent_script(*calls))],
                             default={"tool_calls": [tool_call("echo", x="again")]})


def _callback_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == CALLBACK_LOGGER]


def test_a_max_turns_stop_logs_no_callback_error(run: Any, caplog: pytest.LogCaptureFixture) -> None:
    agent = create_deep_agent(_looping(("loop", "looper")), [echo], subagents=[
        {"name": "looper", "description": "l", "tools": ["echo"], "max_turns": 2}])
    with caplog.at_level(logging.WARNING):
        out = run(agent, user("go"), {"recursion_limit": 200})
    assert records(out)[0]["stop_reason"] == "max_turns"
    assert _callback_warnings(caplog) == []


def test_a_spent_budget_logs_no_callback_error(run: Any, caplog: pytest.LogCaptureFixture) -> None:
    # Enough for the child to start and loop a while: the meter stops it between two of its calls. The scripted
    # model's usage leaves out the tool schemas the estimate counts, so no ratio is learned from it: each call
    # holds 16x its estimate.
    agent = create_deep_agent(_looping(("loop", "looper")), [echo],
                              settings=DelegationSettings.of(budget=Budget(max_tokens=5000)), subagents=[
        {"name": "looper", "description": "l", "tools": ["echo"], "max_turns": 1000}])
    with caplog.at_level(logging.WARNING):
        out = run(agent, user("go"), {"recursion_limit": 2000})
    (record,) = records(out)
    assert record["stop_reason"] == "budget" and record["model_calls"] > 1
    assert "budget" in tool_messages(out)[0].text
    assert _callback_warnings(caplog) == []


class _Broken(BaseCallbackHandler):
    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        raise RuntimeError("a handler of the caller's that fails")


def test_another_handlers_error_is_still_logged(caplog: pytest.LogCaptureFixture) -> None:
    # The check itself can fail: only the meter's warnings are dropped, not the caller's handlers'.
    agent = create_deep_agent(ScriptedChatModel(responses=["hello"]))
    with caplog.at_level(logging.WARNING):
        agent.invoke(user("hi"), {"callbacks": [_Broken()]})
    assert any("_Broken.on_chat_model_start" in m for m in _callback_warnings(caplog))
