"""Once Ctrl-C was pressed (the one handler's flag is set), no child starts, on either driver.

Every delegation goes through the runner's start, which reads the flag after
the delegation is in flight: a Ctrl-C pressed before that is seen there, one
pressed after it stops the child's meter. Each case here is a driver the
runner has (``invoke``, ``ainvoke``); the child's model is never called and
its transcript ends with the ``cancelled`` mark.
"""

from __future__ import annotations

import asyncio
import glob
import json
import signal

import pytest
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.graphs import user
from subagents._runner import request_stop, stop_on_ctrl_c, stop_requested
from subagents._settings import DelegationSettings


def agent_and_child(tmp_path, middleware=()):
    child = ScriptedChatModel(responses=["the child's answer"])
    root = ScriptedChatModel(responses=[{"tool_calls": [tool_call("task", description="Work.", subagent_type="w")]},
                                        "the root's answer"])
    agent = create_deep_agent(root, [],
                              subagents=[{"name": "w", "description": "w", "model": child}],
                              middleware=list(middleware), checkpointer=InMemorySaver() if middleware else None,
                              settings=DelegationSettings.of(sessions_dir=str(tmp_path), general_purpose=False))
    return agent, child


@pytest.mark.parametrize("driver", ["invoke", "ainvoke"])
def test_no_child_starts_once_ctrl_c_was_pressed(tmp_path, driver):
    agent, child = agent_and_child(tmp_path)
    config = {"configurable": {"thread_id": "t"}}
    with stop_on_ctrl_c() as installed:
        assert installed
        request_stop()  # what the handler does first when Ctrl-C is pressed
        with pytest.raises(BaseException) as stopped:  # noqa: PT011 - each driver's own way of stopping
            if driver == "invoke":
                agent.invoke(user("go"), config)
            else:
                asyncio.run(agent.ainvoke(user("go"), config))
        assert stop_requested()
    assert not isinstance(stopped.value, AssertionError)
    assert child.calls == []  # the child never ran
    (path,) = glob.glob(str(tmp_path / "**" / "*.jsonl"), recursive=True)
    assert json.loads(open(path).read().splitlines()[-1]) == {"type": "cancelled"}
    assert not stop_requested()  # the handler is gone: the flag binds the run it watched only


def test_a_new_run_starts_with_the_flag_cleared(tmp_path):
    with stop_on_ctrl_c():
        request_stop()
    agent, child = agent_and_child(tmp_path)
    with stop_on_ctrl_c():
        out = agent.invoke(user("go"), {"configurable": {"thread_id": "t"}})
    assert out["messages"][-1].text == "the root's answer" and len(child.calls) == 1


def paused_at_an_approval(tmp_path):
    """A synchronous run that stops after the model call that started children: its watch stays installed."""
    agent, _ = agent_and_child(tmp_path, middleware=[HumanInTheLoopMiddleware({"task": True})])
    out = agent.invoke(user("go"), {"configurable": {"thread_id": "t"}})
    assert out["__interrupt__"]


def a_tool_error_ends_it(tmp_path):
    """Same, when a tool called beside the task raises and ends the run."""
    @tool
    def broken() -> str:
        """Fails."""
        raise RuntimeError("the tool broke")

    root = ScriptedChatModel(responses=[{"tool_calls": [tool_call("broken"),
                                                        tool_call("task", description="Work.", subagent_type="w")]}])
    child = ScriptedChatModel(responses=["the child's answer"])
    agent = create_deep_agent(root, [broken],
                              subagents=[{"name": "w", "description": "w", "model": child}],
                              settings=DelegationSettings.of(sessions_dir=str(tmp_path), general_purpose=False))
    with pytest.raises(RuntimeError, match="the tool broke"):
        agent.invoke(user("go"), {"configurable": {"thread_id": "t"}})


@pytest.mark.parametrize("stopped_run", [paused_at_an_approval, a_tool_error_ends_it])
def test_a_run_that_stops_mid_delegation_leaves_ctrl_c_to_python(tmp_path, stopped_run):
    stopped_run(tmp_path / "first")
    with pytest.raises(KeyboardInterrupt):  # a Ctrl-C between runs interrupts the program, as Python's own does
        signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    stopped_run(tmp_path / "second")
    with stop_on_ctrl_c():  # a program's own block over what the stopped run left: its flag and handler
        request_stop()
    assert not stop_requested() and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    agent, child = agent_and_child(tmp_path / "third")
    with stop_on_ctrl_c():
        out = agent.invoke(user("go"), {"configurable": {"thread_id": "t"}})
    assert out["messages"][-1].text == "the root's answer" and len(child.calls) == 1
