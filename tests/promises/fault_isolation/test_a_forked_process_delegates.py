"""A process forked after a delegation (a server's pre-forked workers, ``multiprocessing`` with fork) delegates.

A forked child has none of its parent's threads: a pool the library made before the fork would take the
child's work and never run it, and the child's first ``ainvoke`` delegation would wait for ever.
"""

from __future__ import annotations

import asyncio
import os

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.graphs import records, user
from helpers.processes import forked_exit_code
from subagents._settings import DelegationSettings

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
    assert forked_exit_code(pid, 120) == 0, "the forked process's delegation failed or never ended"
