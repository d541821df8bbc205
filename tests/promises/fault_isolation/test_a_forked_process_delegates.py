"""A process forked after a delegation (a server's pre-forked workers, ``multiprocessing`` with fork) delegates.

A forked child has none of its parent's threads: a pool the library made before the fork would take the
child's work and never run it, and the child's first ``ainvoke`` delegation would wait for ever.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

from deep_agent import create_deep_agent
from deep_agent.testing import ScriptedChatModel, tool_call
from helpers.graphs import records, user
from subagents.settings import DelegationSettings

DELEGATE = {"tool_calls": [tool_call("task", description="Work.", subagent_type="w")]}


def test_an_ainvoke_delegation_in_a_process_forked_after_one_completes(tmp_path):
    child = ScriptedChatModel(responses=["the answer"])
    root = ScriptedChatModel(responses=[DELEGATE, "done"])
    agent = create_deep_agent(root, [], subagents=[{"name": "w", "description": "w", "model": child}],
                              settings=DelegationSettings.of(sessions_dir=str(tmp_path), general_purpose=False))
    assert [r["status"] for r in records(asyncio.run(agent.ainvoke(user("go"))))] == ["completed"]
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: exit 0 only if its own delegation completed
        code = 1
        try:
            state = asyncio.run(agent.ainvoke(user("go")))
            code = 0 if [(r["status"], r["result"]) for r in records(state)] == [("completed", "the answer")] else 2
        finally:
            os._exit(code)
    done = (0, 0)
    try:
        deadline = time.monotonic() + 120  # a hang guard, not a time the delegation must keep
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert done[0] == pid, "the forked process's delegation never ended"
        assert os.waitstatus_to_exitcode(done[1]) == 0
    finally:
        if done[0] == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
