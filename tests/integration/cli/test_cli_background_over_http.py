"""``deep-agent run`` in a pseudo-terminal against an OpenAI-compatible HTTP server, with a background task.

The run's model is a ``ChatOpenAI`` the CLI builds from ``OPENAI_BASE_URL``;
the background child runs on the background runtime's own loop. Before each
runtime had its own client, every such child failed with "... is bound to a
different event loop" while the run still exited 0.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from helpers.chat_server import CHILD_ANSWER, STARTED, ScriptedChatServer
from helpers.cli import ANSI, entry_point, make_project, terminal_env


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    running = ScriptedChatServer()
    yield running
    running.close()


def test_a_background_task_over_http_completes_in_a_terminal_run(server: ScriptedChatServer, tmp_path: Path) -> None:
    project = make_project(tmp_path)
    env = {**terminal_env(project), "OPENAI_API_KEY": "x", "OPENAI_BASE_URL": server.url,
           "OPENAI_MODEL": "scripted"}
    screen = io.StringIO()
    command, *args = entry_point()
    child = pexpect.spawn(command, [*args, "run", "please start a background task"], cwd=str(project), env=env,
                          dimensions=(60, 200), encoding="utf-8", timeout=90)
    child.logfile_read = screen
    child.expect(pexpect.EOF)
    child.close()
    text = ANSI.sub("", screen.getvalue())

    assert child.exitstatus == 0, text[-3000:]
    assert server.child_requests(), "the background child's request never reached the server"
    assert STARTED in text
    # The thread's record of the background task: completed, with the server's answer as its result.
    listed = pexpect.run(" ".join([command, *args, "tasks", "--full"]), cwd=str(project), env=env,
                         encoding="utf-8", timeout=60)
    assert "background" in listed and "completed" in listed and CHILD_ANSWER in listed, listed
    assert "different event loop" not in listed
