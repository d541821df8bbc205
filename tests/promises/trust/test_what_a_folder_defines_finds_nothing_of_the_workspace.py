"""A hook or a stdio MCP server finds neither a module nor a program of the workspace in place of the one meant.

Each starts through ``subagents.definitions._on_host.launch``, which gives it
``PYTHONSAFEPATH=1`` and a ``PATH`` of absolute folders only. Before: hooks got
``PYTHONSAFEPATH`` and servers did not, so a server ``python3 -m x`` started in
the workspace imported an agent-written ``datetime.py`` (with the server's
declared keys in reach); and a relative ``PATH`` entry (``node_modules/.bin``,
``.``) let an agent-written ``python3`` be the one a guard ``python3 -c ...``
ran (and, for an unprivileged user, the sandbox's own launcher on the host).
Checked confined (as root and as an unprivileged user) and unconfined.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from deep_agent.tools import Workspace, builtin_tools
from subagents.definitions._on_host import launch


@pytest.mark.parametrize("bash", ["sandbox", "unconfined"])
def test_a_started_python_imports_nothing_from_the_workspace_nor_is_a_program_of_it(runner, monkeypatch, bash):
    if bash == "unconfined" and "user" in runner.popen:
        pytest.skip("unconfined, the user makes no difference: root's run shows it")
    ws = runner.ws
    (ws / "calendar.py").write_text("open('module-ran', 'w').close()\n")
    (ws / "bin").mkdir()
    (ws / "bin" / "python3").write_text("#!/bin/sh\ntouch program-ran\n")
    (ws / "bin" / "python3").chmod(0o755)
    runner.chown(ws)
    monkeypatch.setenv("PATH", f"bin:.:{os.environ['PATH']}")  # a dev shell's relative entries

    def body() -> str:
        builtin_tools(Workspace(ws), bash=bash)  # type: ignore[arg-type]
        with launch(["python3", "-m", "calendar", "2026"]) as (argv, env):
            return subprocess.run(argv, env=env, cwd=ws, capture_output=True, text=True, timeout=60).stdout

    said = runner.in_a_process(body)
    assert "2026" in said and "January" in said, said  # the real python3 ran the real calendar
    assert not (ws / "module-ran").exists() and not (ws / "program-ran").exists()
