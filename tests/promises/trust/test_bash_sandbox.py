"""Bash runs in a sandbox: only the workspace can be written; home, /tmp and the network are out of reach.

Before: the command line's ``Bash``, listed among the tools that "work
inside --workspace DIR", read ``../secret.txt`` and wrote outside the
workspace. It now runs under bubblewrap (Debian's ``bubblewrap`` package,
which ``.ci/run`` installs).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
from pathlib import Path

import pytest

from deep_agent.tools import Workspace, builtin_tools
from deep_agent.tools.sandbox import Sandbox
from deep_agent.tools.shell import shell_tools

if shutil.which("bwrap") is None:
    if os.environ.get("CI"):
        raise RuntimeError("bwrap is not installed: install Debian's bubblewrap package (.ci/run does)")
    pytest.skip("bwrap is not installed (Debian's bubblewrap package)", allow_module_level=True)


@pytest.fixture()
def layout(tmp_path: Path) -> tuple[Path, Path]:
    workspace = tmp_path / "project"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("the neighbour's secret")
    return workspace, tmp_path


def _bash(workspace: Path, **sandbox: bool):
    (tool,) = shell_tools(Workspace(workspace), Sandbox.find(**sandbox))
    return lambda command, timeout=20_000: tool.invoke({"command": command, "timeout": timeout})


def test_the_workspace_is_writable_and_nothing_beside_it(layout):
    workspace, outside = layout
    bash = _bash(workspace)
    out = bash("echo kept > inside.txt && cat inside.txt; echo x > ../escaped.txt; echo x > /etc/escaped; "
               "cat ../secret.txt; echo done")
    assert (workspace / "inside.txt").read_text() == "kept\n"
    assert not (outside / "escaped.txt").exists() and not Path("/etc/escaped").exists()
    assert "the neighbour's secret" not in out and "done" in out


def test_the_home_folder_is_empty_inside(layout, tmp_path_factory):
    workspace, _ = layout
    out = _bash(workspace)(f"ls -A {Path.home()} | wc -l; ls {Path.home()}/.ssh 2>&1 | head -1")
    assert out.splitlines()[0].strip() == "0"


def _listener() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    threading.Thread(target=lambda: server.accept(), daemon=True).start()
    return server, server.getsockname()[1]


def test_no_network_unless_allowed(layout):
    workspace, _ = layout
    server, port = _listener()
    try:
        probe = f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2); print(\"reached\")'"
        assert "reached" not in _bash(workspace)(probe)
        assert "reached" in _bash(workspace, network=True)(probe)
    finally:
        server.close()


def test_a_timeout_still_ends_a_sandboxed_command(layout):
    workspace, _ = layout
    out = _bash(workspace)("sleep 30", timeout=500)
    assert "[command killed after 0.5s timeout]" in out


def test_the_command_line_offers_no_bash_without_bubblewrap_unless_told(monkeypatch, tmp_path):
    import argparse

    from deep_agent.cli.run import bash_setting

    args = argparse.Namespace(unsafe_bash=False, allow_network=False)
    bash, note = bash_setting(args)
    assert isinstance(bash, Sandbox) and note is None
    monkeypatch.setattr(shutil, "which", lambda name: None)
    bash, note = bash_setting(args)
    assert bash is False and "Bash is off" in note and "--unsafe-bash" in note
    assert "Bash" not in [t.name for t in builtin_tools(tmp_path, bash=bash)]
    bash, note = bash_setting(argparse.Namespace(unsafe_bash=True, allow_network=False))
    assert bash is True and "unconfined" in note


def test_a_sandboxed_command_cannot_plant_what_runs_later_outside_the_sandbox(layout):
    workspace, _ = layout
    (workspace / ".git" / "hooks").mkdir(parents=True)
    (workspace / ".git" / "config").write_text("[core]\n")
    (workspace / ".claude" / "agents").mkdir(parents=True)
    (workspace / ".deep_agent").mkdir()
    (workspace / ".mcp.json").write_text("{}")
    (workspace / "config").mkdir()
    (workspace / ".agents").symlink_to(workspace / "config", target_is_directory=True)
    out = _bash(workspace)(
        "echo 'touch pwned' > .git/hooks/pre-commit; echo '[core] fsmonitor = touch pwned' >> .git/config;"
        " echo planted > .claude/agents/evil.md; echo planted > .agents/evil.md;"
        " echo planted > .deep_agent/state.db; echo '{\"mcpServers\": {}}' > .mcp.json;"
        " mv .git .git-old; rm -rf .claude;"
        " echo commit > .git/COMMIT_EDITMSG; echo fine > ordinary.txt")
    assert "Read-only file system" in out, out
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()
    assert (workspace / ".git" / "config").read_text() == "[core]\n"
    assert not (workspace / ".claude" / "agents" / "evil.md").exists()
    assert (workspace / ".claude" / "agents").is_dir()
    assert not (workspace / "config" / "evil.md").exists()
    assert not (workspace / ".deep_agent" / "state.db").exists()
    assert (workspace / ".mcp.json").read_text() == "{}"
    assert not (workspace / ".git-old").exists(), "`.git` cannot be renamed away and replaced"
    assert (workspace / ".git" / "COMMIT_EDITMSG").read_text() == "commit\n", "the rest of .git stays writable"
    assert (workspace / "ordinary.txt").read_text() == "fine\n"


def test_a_sandboxed_command_does_not_get_the_users_keys_and_tokens(layout, monkeypatch):
    workspace, _ = layout
    for name in ("OPENAI_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID"):
        monkeypatch.setenv(name, f"value-of-{name}")
    monkeypatch.setenv("KEYBOARD_LAYOUT", "plain-setting")
    out = _bash(workspace)("env")
    assert "value-of-" not in out, out
    assert "plain-setting" in out, out


def test_a_worktrees_git_pointer_cannot_be_redirected_to_planted_hooks(layout):
    workspace, _ = layout
    (workspace / ".git").write_text("gitdir: /somewhere/else/.git/worktrees/project\n")
    out = _bash(workspace)("mkdir -p evil/hooks; echo 'gitdir: evil' > .git; echo done")
    assert "Read-only file system" in out and "done" in out, out
    assert (workspace / ".git").read_text() == "gitdir: /somewhere/else/.git/worktrees/project\n"


def test_the_folder_beside_the_workspace_and_run_and_key_agents_are_hidden(monkeypatch):
    """A workspace outside /tmp and the home folder: its neighbours (a secret beside it) were readable
    through the read-only root, and /run held the user's key-agent sockets."""
    import uuid

    repo = Path(__file__).resolve().parents[3]
    base = repo / ".pytest_cache" / f"sandbox-{uuid.uuid4().hex[:8]}"
    workspace = base / "project"
    workspace.mkdir(parents=True)
    (base / "secret.txt").write_text("the neighbour's secret")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/run/user/0/agent.sock")
    try:
        out = _bash(workspace)("cat ../secret.txt; ls -A /run | wc -l; echo sock=${SSH_AUTH_SOCK:-none}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert "the neighbour's secret" not in out
    lines = out.splitlines()
    assert "0" in [line.strip() for line in lines] and "sock=none" in out, out
