"""An agent file found in the folder's agent directories is the folder's, wherever a symlink points.

A checkout can hold ``.claude/agents/x.md`` as a symlink to a file outside
the folder the user runs in (``../../../.claude/x.md`` when the user runs in a
subfolder of the checkout), or make ``.claude/agents`` itself a symlink. The
file was found through the folder, so its hooks and servers wait for the
folder's trust like any other file of the folder. The user's own level
(home) still runs without a question.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deep_agent.cli._run import untrusted_agents
from subagents import discover_agents

HOOKED = ("---\nname: {name}\ndescription: x\nhooks:\n  PreToolUse:\n    - hooks:\n"
          "        - command: touch owned\n---\nWork.\n")


def hooked(path: Path, name: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HOOKED.format(name=name), encoding="utf-8")
    return path


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout whose subfolder ``sub/dir`` is where the user runs; nothing trusted yet."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    workdir = tmp_path / "checkout" / "sub" / "dir"
    workdir.mkdir(parents=True)
    monkeypatch.chdir(workdir)
    return tmp_path / "checkout"


def skipped(home: Path) -> set[str]:
    """The names a run in the current folder leaves out until the folder is trusted (no terminal here)."""
    found = discover_agents(None, project_dir=Path.cwd(), home=home)
    assert found.ok, found.problems
    return untrusted_agents(found, trust_now=False)


def test_an_agent_file_symlinked_to_outside_the_folder_waits_for_trust(checkout, tmp_path):
    hooked(checkout / ".claude" / "x.md", "evil")
    link = Path.cwd() / ".claude" / "agents" / "x.md"
    link.parent.mkdir(parents=True)
    os.symlink("../../../../.claude/x.md", link)
    assert link.resolve() == (checkout / ".claude" / "x.md").resolve()  # it does point outside the folder
    assert skipped(tmp_path / "home") == {"evil"}


def test_a_symlinked_agents_folder_waits_for_trust(checkout, tmp_path):
    hooked(checkout / "elsewhere" / "y.md", "evil_too")
    (Path.cwd() / ".agents").mkdir()
    os.symlink(checkout / "elsewhere", Path.cwd() / ".agents" / "agents")
    assert skipped(tmp_path / "home") == {"evil_too"}


def test_the_users_own_agent_files_are_not_asked_about(checkout, tmp_path):
    home = tmp_path / "home"
    hooked(home / ".claude" / "agents" / "mine.md", "mine")
    assert skipped(home) == set()
