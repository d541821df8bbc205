"""A local start answered at once, whose runtime closes before its loop takes it, is stored ``lost``.

A local start is recorded in the tool's own thread and handed to the
runtime's loop (see ``LocalTaskRunner.start_soon``). If the runtime closes
before the loop gets to it, the task never runs. Every other task of a
closing runtime has ``lost`` written to the thread's outcome file, which is
how another process sharing that SQLite file learns of it; this one must be
too, or that process reads it ``pending`` for as long as this one lives.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver

from deep_agent._testing import ScriptedChatModel
from middleware import BackgroundSubagentMiddleware
from subagents import BackgroundRuntime
from subagents._outcome import TaskCall
from subagents._settings import DelegationSettings


def test_a_start_the_loop_never_took_is_stored_lost(tmp_path: Path) -> None:
    db = tmp_path / "threads.sqlite"
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    runtime = BackgroundRuntime()
    middleware = BackgroundSubagentMiddleware(
        [{"name": "researcher", "description": "Finds facts.", "system_prompt": "Answer."}],
        model=ScriptedChatModel(default="Done."), settings=DelegationSettings.of(background_runtime=runtime))
    call = TaskCall(subagent_type="researcher", description="Look it up.", parent_state={},
                    tool_call_id="call-1",
                    parent_config={"configurable": {"thread_id": "t1", "__pregel_checkpointer": saver}},
                    parent_model=ScriptedChatModel(default="Done."))

    # The loop is busy (an operation blocking it) while the start is handed over, and the runtime
    # closes before the loop is free again: the loop never takes the start.
    busy, release = threading.Event(), threading.Event()

    async def block() -> None:
        busy.set()
        release.wait(30)

    runtime.submit(block())
    assert busy.wait(30)
    record = middleware.tasks.start_soon(call, {})
    assert record is not None and record["status"] == "pending" and record["outcome_db"] == str(db.resolve())
    closing = threading.Thread(target=runtime.close)
    closing.start()
    for _ in range(3000):  # close() marks the runtime closed at once, then waits for the loop
        if runtime.closed:
            break
        threading.Event().wait(0.01)
    assert runtime.closed
    release.set()
    closing.join(60)
    assert not closing.is_alive()

    reader = BackgroundRuntime()
    try:
        stored = reader.outcomes.file(str(db.resolve())).load(record["id"])
    finally:
        reader.close()
        conn.close()
    assert stored is not None, "the start was answered, but nothing says it never ran"
    assert stored["status"] == "lost"
    assert "closed" in stored["error"]
