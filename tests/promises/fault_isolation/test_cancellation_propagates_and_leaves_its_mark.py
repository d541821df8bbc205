"""Real cancellation is not a failure: it propagates once the child has stopped, and leaves a ``cancelled`` mark.

``CancelledError`` on ``ainvoke`` and ``KeyboardInterrupt`` on ``invoke`` reach
the caller; the child's transcript ends with the mark, also for a task still
waiting for a concurrency slot.
"""

from __future__ import annotations

import asyncio
import glob
import json
import signal
import threading
import time
from typing import Any

import pytest
from langchain_core.tools import tool

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.attacks import _parallel, _user
from helpers.graphs import user
from subagents import SubagentSpec
from subagents._runner import is_ctrl_c, stop_on_ctrl_c
from subagents._settings import DelegationSettings


def _ctrl_c_lands(text: str = "") -> None:
    """Ctrl-C while a child's tool runs (on a worker thread, on invoke): SIGINT to the main thread, which waits
    on the tool step, and, once the handler has noted it, the KeyboardInterrupt it raises here too."""
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
    for _ in range(1000):
        if is_ctrl_c():
            raise KeyboardInterrupt(text)
        time.sleep(0.01)
    raise AssertionError("the Ctrl-C was never noted")


def test_cancelling_ainvoke_propagates_and_marks_the_transcript(tmp_path):
    entered = threading.Event()

    @tool
    async def hang(x: str) -> str:
        """Never returns in time."""
        entered.set()
        await asyncio.sleep(5)
        return x

    model = ScriptedChatModel(rules=[("zzz", [{"tool_calls": [tool_call("hang", x="1")]}, "woke"])],
                              responses=_parallel(("zzz", "w")))
    agent = create_deep_agent(model, [hang],
                              subagents=[{"name": "w", "description": "w", "tools": ["hang"]}],
                              settings=DelegationSettings.of(sessions_dir=str(tmp_path)))

    async def main() -> None:
        running = asyncio.ensure_future(agent.ainvoke(_user(), {"configurable": {"thread_id": "c"}}))
        for _ in range(6000):  # until a child's tool runs (a fixed 0.3 s was too short on a busy machine)
            if entered.is_set():
                break
            await asyncio.sleep(0.01)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    asyncio.run(main())
    (path,) = glob.glob(str(tmp_path / "**" / "*.jsonl"), recursive=True)
    assert json.loads(open(path).read().splitlines()[-1]) == {"type": "cancelled"}


def test_a_keyboard_interrupt_in_a_child_tool_propagates_on_invoke_and_marks_the_transcript(tmp_path):
    @tool
    def ctrl_c(x: str) -> str:
        """Ctrl-C lands while this runs."""
        _ctrl_c_lands()
        return x

    model = ScriptedChatModel(rules=[("job", [{"tool_calls": [tool_call("ctrl_c", x="1")]}, "done"])],
                              responses=_parallel(("job", "w")))
    agent = create_deep_agent(model, [ctrl_c],
                              subagents=[{"name": "w", "description": "w", "tools": ["ctrl_c"]}],
                              settings=DelegationSettings.of(sessions_dir=str(tmp_path)))
    with pytest.raises(KeyboardInterrupt):
        agent.invoke(_user(), {"configurable": {"thread_id": "kbd"}})
    (path,) = glob.glob(str(tmp_path / "**" / "*.jsonl"), recursive=True)
    assert json.loads(open(path).read().splitlines()[-1]) == {"type": "cancelled"}


def _cancelled_events(events: list[Any]) -> list[dict[str, Any]]:
    return [e for e in events if isinstance(e, dict) and e.get("status") == "cancelled"]


def test_a_cancellation_with_a_text_keeps_it_in_its_cancelled_event():
    """The text a cancellation carried was lost: its event, the only place a cancellation is recorded, said
    only that the task was cancelled. (On ``astream`` the run ends before the event is read; so it does here
    under a handler raising on the main thread: the program's handler leaves the run to end from the child.)"""
    @tool
    def ctrl_c(x: str) -> str:
        """Ctrl-C lands while this runs."""
        _ctrl_c_lands("the user stopped the run")
        return x

    model = ScriptedChatModel(rules=[("job", [{"tool_calls": [tool_call("ctrl_c", x="1")]}, "done"])],
                              responses=_parallel(("job", "w")))
    agent = create_deep_agent(model, [ctrl_c], subagents=[{"name": "w", "description": "w", "tools": ["ctrl_c"]}])
    seen: list[Any] = []
    with stop_on_ctrl_c(then=lambda signum, frame: None), pytest.raises(KeyboardInterrupt):
        seen.extend(agent.stream(_user(), stream_mode="custom"))
    (cancelled,) = [e for e in seen if isinstance(e, dict) and e.get("status") == "cancelled"]
    assert cancelled["reason"] == "KeyboardInterrupt: the user stopped the run"


def test_cancelling_the_parent_propagates_and_marks_the_transcript(tmp_path):
    @tool
    async def wait_forever(x: str) -> str:
        """Wait."""
        await asyncio.sleep(60)
        return x

    model = ScriptedChatModel(
        rules=[("wait", [{"tool_calls": [tool_call("wait_forever", x="y")]}, "never"])],
        responses=[{"tool_calls": [tool_call("task", description="wait", subagent_type="waiter")]}, "never"],
    )
    spec = SubagentSpec(name="waiter", description="waits", tools=[wait_forever])
    agent = create_deep_agent(model, subagents=[spec], settings=DelegationSettings.of(sessions_dir=str(tmp_path)))

    async def main() -> None:
        job = asyncio.ensure_future(agent.ainvoke(user("go"), {"configurable": {"thread_id": "t"}}))
        await asyncio.sleep(0.5)
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job

    asyncio.run(main())
    (transcript,) = tmp_path.rglob("agent-*.jsonl")
    assert transcript.read_text().strip().splitlines()[-1] == '{"type": "cancelled"}'


def _cleaning_up_child(log: list[str], fail_in_cleanup: bool = False) -> Any:
    @tool
    async def slow(x: str) -> str:
        """Sleep, and clean up when cancelled."""
        log.append("start")
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            await asyncio.sleep(0.1)
            log.append("cleanup done")
            if fail_in_cleanup:
                raise ValueError("boom during cancel") from None
            raise
        return x

    return slow


@pytest.mark.parametrize("fail_in_cleanup", [False, True], ids=["clean", "cleanup-raises"])
def test_cancelling_the_parent_returns_only_once_the_child_has_stopped(tmp_path, caplog, fail_in_cleanup):
    """The child runs as its own asyncio task on ainvoke: the parent's cancellation still waits for its end."""
    log: list[str] = []
    slow = _cleaning_up_child(log, fail_in_cleanup)
    calls = [tool_call("task", description=f"DO WORK {i}", subagent_type="w") for i in range(6)]
    model = ScriptedChatModel(rules=[("DO WORK", [{"tool_calls": [tool_call("slow", x="a")]}] * 3)],
                              responses=[{"tool_calls": calls}, "done"])
    spec = SubagentSpec(name="w", description="waits", tools=[slow])
    agent = create_deep_agent(model, subagents=[spec], settings=DelegationSettings.of(
        sessions_dir=str(tmp_path), max_concurrent_tasks=2,
    ))

    async def main() -> tuple[list[str], int]:
        # Cancelled once two children are at work (a condition, not a delay: a loaded machine takes longer
        # to get there), from outside, as asyncio.wait_for would.
        running = asyncio.ensure_future(agent.ainvoke(user("go"), {"configurable": {"thread_id": "t"}}))
        deadline = asyncio.get_running_loop().time() + 60
        while log.count("start") < 2 and not running.done() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # room for a third to start, if the cap let one
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        return list(log), len(asyncio.all_tasks()) - 1

    seen, pending = asyncio.run(main())
    assert seen.count("start") == 2 and seen.count("cleanup done") == 2  # two ran (the cap), both ended
    assert pending == 0
    assert "never retrieved" not in caplog.text
    # All six are marked, the four still waiting for a slot included.
    transcripts = sorted(tmp_path.rglob("agent-*.jsonl"))
    assert len(transcripts) == 6
    assert all(t.read_text().strip().splitlines()[-1] == '{"type": "cancelled"}' for t in transcripts)


_CTRL_C_SCRIPT = r'''
import json, os, signal, threading, time
from langchain_core.tools import tool
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call

calls = []

@tool
def step(x: str) -> str:
    """One step of work with a side effect."""
    calls.append(time.monotonic())
    time.sleep(0.1)
    return "stepped"

model = ScriptedChatModel(
    rules=[("job", [{"tool_calls": [tool_call("step", x=str(i))]} for i in range(60)] + ["done"])],
    responses=[{"tool_calls": [tool_call("task", description=f"job {i}", subagent_type="w") for i in range(3)]},
               "parent"])
agent = create_deep_agent(model, [step], subagents=[{"name": "w", "description": "w", "tools": ["step"],
                                                     "max_turns": 100}])
quick = create_deep_agent(ScriptedChatModel(rules=[("job", ["done"])], responses=[
    {"tool_calls": [tool_call("task", description="job q", subagent_type="general-purpose")]}, "parent"]), [])
quick.invoke({"messages": [{"role": "user", "content": "go"}]})
restored = signal.getsignal(signal.SIGINT) is signal.default_int_handler  # asyncio.run installs its own over it
sent = []
def press_ctrl_c():
    # Once the three children are at work (not at a fixed time: on a loaded machine 0.6 s could fall
    # before any child had begun, which is not what this test is about).
    deadline = time.monotonic() + 60
    while len(calls) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    sent.append(time.monotonic())
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=press_ctrl_c, daemon=True).start()
try:
    agent.invoke({"messages": [{"role": "user", "content": "go"}]}, {"recursion_limit": 1000})
    print(json.dumps({"interrupted": False}))
except KeyboardInterrupt:
    back = time.monotonic()
    time.sleep(0.5)
    print(json.dumps({"interrupted": True, "after_s": back - sent[0], "restored": restored,
                      "restored_after_interrupt": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
                      "steps_after": sum(t > sent[0] for t in calls), "steps_after_return": sum(t > back for t in calls)}))
'''


def test_ctrl_c_on_invoke_stops_parallel_children_at_once(tmp_path):
    """A real SIGINT while three children work on invoke: before, the siblings ran on (165 more steps with side
    effects) and the KeyboardInterrupt reached the caller 6 s later; now each stops at its next step."""
    import os
    import subprocess
    import sys

    script = tmp_path / "ctrl_c.py"
    script.write_text(_CTRL_C_SCRIPT)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = {**os.environ, "PYTHONPATH": root}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["interrupted"], done.stderr[-2000:]
    assert result["steps_after"] <= 6, result  # at most the step each child was in, and one it had begun
    assert result["steps_after_return"] == 0, result
    # Python's own handler is back after a run and after the interrupt: asyncio.run can install its own
    assert result["restored"] and result["restored_after_interrupt"], result
