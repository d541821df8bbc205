"""The command line shows what is true: whole calls to approve, whole errors on request, honest usage and exits.

Each test drives ``deep-agent`` through its real entry point (a subprocess,
or a pseudo-terminal where a person would type) on a scripted model.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import pexpect
import pytest
from helpers.cli import ANSI, SCRIPTS, cli, entry_point, make_project, terminal_env
from helpers.scripted.cli_scripts import HIDDEN_TAIL, LONG_ERROR

RESEARCHER = "---\nname: researcher\ndescription: Researches one topic.\n---\nAnswer in one line.\n"


def _spawn(project: Path, prompt: str, script: str, *extra: str) -> tuple[Any, io.StringIO]:
    screen = io.StringIO()
    command, *args = entry_point()
    child = pexpect.spawn(command, [*args, "run", prompt, "--model", f"scripted:cli_scripts:{script}", *extra],
                          cwd=str(project), env=terminal_env(project), dimensions=(60, 200),
                          encoding="utf-8", timeout=60)
    child.logfile_read = screen
    return child, screen


def test_a_key_typed_before_the_approval_prompt_does_not_answer_it(tmp_path):
    project = make_project(tmp_path)
    child, screen = _spawn(project, "Fix the typo", "slow_one_edit")
    time.sleep(0.5)
    child.send("y\r")  # typed ahead, long before any call waits for approval
    child.expect(r"Approve\? \[y\]es / \[n\]o / \[a\]lways: ")
    child.sendline("n")
    child.expect(r"Reason")
    child.sendline("not now")
    child.expect(pexpect.EOF)
    child.close()
    text = ANSI.sub("", screen.getvalue())
    assert "rejected Edit" in text, text[-3000:]
    assert (project / "notes.txt").read_text() == "These are teh notes of the project.\n"


def test_the_approval_prompt_shows_the_whole_command_whatever_its_length(tmp_path):
    project = make_project(tmp_path)
    child, screen = _spawn(project, "Run it", "padded_bash")
    child.expect(r"Approve\? \[y\]es / \[n\]o / \[a\]lways: ")
    child.sendline("n")
    child.expect(r"Reason")
    child.sendline("no")
    child.expect(pexpect.EOF)
    child.close()
    shown = " ".join(ANSI.sub("", screen.getvalue()).split())
    assert HIDDEN_TAIL.strip() in shown, shown[-3000:]
    assert not (project / "hidden-at-the-end").exists()


@pytest.fixture()
def failed_run(tmp_path: Path) -> Path:
    agents = tmp_path / ".agents" / "agents"
    agents.mkdir(parents=True)
    (agents / "researcher.md").write_text(RESEARCHER, encoding="utf-8")
    (tmp_path / "home").mkdir()
    run = cli("run", "Ask the researcher", "--thread", "t-fail", "--model", "scripted:cli_scripts:failing_child",
              cwd=tmp_path, env=SCRIPTS)
    assert run.returncode == 0, run.stderr
    assert LONG_ERROR not in " ".join(run.stdout.split())  # the tree shows a cut
    assert "(deep-agent tasks --full)" in " ".join(run.stdout.split())
    return tmp_path


def test_tasks_cuts_a_long_error_and_full_prints_it_whole(failed_run):
    cut = cli("tasks", "t-fail", cwd=failed_run)
    assert cut.returncode == 0 and "--full" in cut.stdout
    assert "its very end" not in " ".join(cut.stdout.split())
    full = cli("tasks", "t-fail", "--full", cwd=failed_run)
    assert full.returncode == 0, full.stderr
    assert "its very end" in " ".join(full.stdout.split())


def test_the_transcript_of_a_failed_task_ends_with_its_error(failed_run):
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    from deep_agent.cli._store import read_thread

    with sqlite3.connect(failed_run / ".deep_agent" / "state.sqlite") as conn:
        (task_id,) = read_thread(SqliteSaver(conn), "t-fail")["subagent_tasks"]
    shown = cli("transcript", task_id, cwd=failed_run)
    assert shown.returncode == 0, shown.stderr
    last = " ".join(shown.stdout.split()).rsplit("error:", 1)[-1]
    assert "its very end" in last


def test_a_model_name_without_a_provider_is_a_bad_argument_exit_2(tmp_path):
    (tmp_path / "home").mkdir()
    run = cli("run", "hi", "--model", "smollm2", cwd=tmp_path)
    assert run.returncode == 2 and "--model" in run.stderr


def test_an_unknown_flag_shows_the_usage_of_the_command_it_was_given_to(tmp_path):
    (tmp_path / "home").mkdir()
    run = cli("run", "hi", "--bogus", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.startswith("usage: deep-agent run") and "unrecognized arguments: --bogus" in run.stderr


def test_a_misplaced_agents_folder_is_named_in_a_note(tmp_path):
    (tmp_path / ".claude" / "agent").mkdir(parents=True)
    (tmp_path / "home").mkdir()
    run = cli("run", "hi", "--model", "scripted:deep_agent._demo:demo_model", cwd=tmp_path)
    assert ".claude/agent/ is not read: agent files go in .claude/agents/" in " ".join(run.stdout.split())
