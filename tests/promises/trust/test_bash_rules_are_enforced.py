"""An agent file's ``Bash(git diff:*)`` limits its ``Bash`` to those commands, as in Claude Code.

Before: the command line read ``tools: Read, Bash(git diff:*)`` as the whole
``Bash`` tool, so the ``differ`` agent ran ``touch plain.txt`` and chained
``git diff; touch chained.txt``. Now ``Bash(prefix:*)`` allows the prefix
(at a word boundary), ``Bash(exact)`` exactly that command, several rules are
an allowlist, and a shell metacharacter is refused with an error naming the rules.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.cli import SCRIPTS, cli
from langchain_core.tools import BaseTool, ToolException

from deep_agent.tools import Workspace
from deep_agent.tools._catalog import with_bash_rules
from deep_agent.tools._command_rules import CommandRules


@pytest.mark.parametrize(("command", "allowed"), [
    ("git diff", True),
    ("git diff --stat", True),
    ("  git diff HEAD~1 -- src/app.py", True),
    ("git status", True),
    ("git  status", True),
    ("git status --short", False),
    ("git diffx", False),
    ("git diff; touch x", False),
    ("git diff && rm -rf x", False),
    ("git diff | sh", False),
    ("git diff > /etc/x", False),
    ("git diff < /etc/passwd", False),
    ("git diff $(touch x)", False),
    ("git diff `touch x`", False),
    ("git diff\ntouch x", False),
    ("git diff & touch x", False),
    ("touch x", False),
    ("", False),
])
def test_bash_rules_are_a_prefix_allowlist_refusing_shell_metacharacters(command, allowed):
    rules = CommandRules.parse(["Read", "Bash(git diff:*)", "Bash(git status)"])
    assert rules is not None
    if allowed:
        rules.check(command)
    else:
        with pytest.raises(ToolException, match=r"Bash\(git diff:\*\), Bash\(git status\)"):
            rules.check(command)


def test_plain_bash_beside_a_rule_allows_every_command_and_a_rule_of_nothing_is_an_error():
    assert CommandRules.parse(["Bash(git diff:*)", "Bash"]) is None
    assert CommandRules.parse(["Read", "Grep"]) is None
    for bad in ("Bash()", "Bash(*)", "Bash(git diff; rm:*)"):
        with pytest.raises(ValueError, match=r"Bash\("):
            CommandRules.parse([bad])


def test_a_tools_list_with_a_rule_gets_a_bash_bound_to_it(tmp_path):
    ws = Workspace(tmp_path)
    read, bash = with_bash_rules(["Read", "Bash(echo:*)"], ws, "unconfined")
    assert read == "Read" and isinstance(bash, BaseTool) and bash.name == "Bash"
    assert "Bash(echo:*)" in bash.description
    assert "hello" in str(bash.invoke({"command": "echo hello"}))
    refused = str(bash.invoke({"command": "touch made.txt"}))
    assert "may only run commands allowed by Bash(echo:*)" in refused
    assert not (tmp_path / "made.txt").exists()
    assert with_bash_rules(["Read", "Bash"], ws, "unconfined") == ["Read", "Bash"]  # no rule: unchanged
    assert with_bash_rules(["Bash(echo:*)"], ws, None) == ["Bash"]  # Bash off: nothing to bind


DIFFER = """---
name: differ
description: Shows the diff of the project.
tools: Read, Bash(git diff:*)
---
Show the diff.
"""


def _project(tmp_path: Path, agent: str) -> tuple[Path, Path]:
    workspace = tmp_path / "project"
    agents = workspace / "agents"
    agents.mkdir(parents=True)
    (workspace / "home").mkdir()
    (agents / "differ.md").write_text(agent)
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    return workspace, agents


def test_an_agent_files_bash_rule_is_enforced_in_a_run(tmp_path):
    workspace, agents = _project(tmp_path, DIFFER)
    done = cli("run", "Show it", "--model", "scripted:command_rule_scripts:differ", "--yes", "--unsafe-bash",
               "--agents-dir", str(agents), cwd=workspace, env=dict(SCRIPTS))
    assert done.returncode == 0, done.stderr
    shown = " ".join(done.stdout.split())
    assert not (workspace / "chained.txt").exists() and not (workspace / "plain.txt").exists()
    assert not (workspace / "diff.txt").exists()
    assert "metacharacter" in shown and "Bash(git diff:*)" in shown, shown
    assert "may only run commands allowed by Bash(git diff:*)" in shown, shown


def test_a_rule_that_cannot_be_enforced_is_an_error_naming_the_file(tmp_path):
    workspace, agents = _project(tmp_path, DIFFER.replace("Bash(git diff:*)", "Bash(git diff; rm:*)"))
    done = cli("run", "Show it", "--model", "scripted:command_rule_scripts:differ", "--yes", "--unsafe-bash",
               "--agents-dir", str(agents), cwd=workspace, env=dict(SCRIPTS))
    assert done.returncode != 0
    said = " ".join((done.stdout + done.stderr).split())
    assert "differ.md" in said and "metacharacter" in said, said


@pytest.mark.parametrize(("command", "allowed"), [
    ("npm run test", True),
    ("npm run test -- --watch", True),
    ("npm run build", False),
    ("npm run testx", False),
])
def test_claude_codes_space_star_form_is_a_prefix_rule_too(command, allowed):
    rules = CommandRules.parse(["Bash(npm run test *)"])
    assert rules is not None and rules.allows(command) is allowed


@pytest.mark.parametrize("bad", ["Bash(:*)", "Bash( *)", "Bash($(curl x) *)", "Bash(git diff > x:*)"])
def test_a_rule_holding_a_metacharacter_anywhere_or_nothing_is_an_error(bad):
    with pytest.raises(ValueError, match=r"Bash\("):
        CommandRules.parse([bad])
