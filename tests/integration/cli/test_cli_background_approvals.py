"""A background child that pauses on a risky call is asked about in the terminal, like a ``task`` child.

The root starts editors with ``start_async_task`` (scripted model:
``tests/helpers/scripted/cli_background_scripts.py``); each editor wants one ``Edit`` of the
workspace's ``notes.txt``. The person approves one and rejects the other
with a reason; ``--yes`` approves; without a terminal and without ``--yes``
the run stops with an error naming the tool. The thread's ledger ends with
each task's real outcome, never ``lost``.
"""

from __future__ import annotations

import io
import re
import sqlite3
from pathlib import Path

import pexpect
import pytest

from deep_agent.cli._store import read_thread
from helpers.cli import ANSI, SCRIPTS, cli, entry_point, make_project, terminal_env

ORIGINAL = "These are teh notes of the project.\n"
FIXED = "These are the notes of the project.\n"


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def ledger(project: Path, thread: str) -> dict:
    from langgraph.checkpoint.sqlite import SqliteSaver

    with sqlite3.connect(project / ".deep_agent" / "state.sqlite") as conn:
        return read_thread(SqliteSaver(conn), thread).get("async_tasks") or {}


def by_description(records: dict) -> dict[str, dict]:
    return {record["description"].split(" in ")[0].split(".")[0]: record for record in records.values()}


def test_a_background_edit_is_approved_and_another_rejected_at_the_terminal(project):
    screen = io.StringIO()
    command, *args = entry_point()
    child = pexpect.spawn(command, [*args, "run", "Tidy the notes", "--thread", "t1",
                                    "--model", "scripted:cli_background_scripts:background_edits"],
                          cwd=str(project), env=terminal_env(project), dimensions=(60, 200),
                          encoding="utf-8", timeout=60)
    child.logfile_read = screen
    asked = []
    for _ in range(2):
        child.expect(r"editor wants to call Edit")
        child.expect(r"old_string: (\w+)")
        old = child.match.group(1)
        child.expect(r"Approve\? \[y\]es / \[n\]o / \[a\]lways: ")
        if old == "teh":
            child.sendline("y")
        else:
            child.sendline("maybe")  # not an answer: asked again
            child.expect(r"Please answer y, n or a\.")
            child.expect(r"Approve\? \[y\]es / \[n\]o / \[a\]lways: ")
            child.sendline("n")
            child.expect_exact("Reason (the agent reads it): ")
            child.sendline("keep the notes lower-case")
        asked.append(old)
    child.expect(pexpect.EOF)
    child.close()
    text = ANSI.sub("", screen.getvalue())
    assert child.exitstatus == 0, text[-3000:]
    assert sorted(asked) == ["notes", "teh"]

    # The approved edit ran once, the rejected one never did.
    assert (project / "notes.txt").read_text() == FIXED
    assert "approved Edit (editor)" in text
    assert "rejected Edit (editor): keep the notes lower-case" in text
    # The tree's last frame shows both tasks as they ended; nothing is lost.
    final = text[max(text.rindex("approved Edit"), text.rindex("rejected Edit")):]
    assert len(re.findall(r"editor \[background, local, attempt 1\] +\w{8} +completed", final)) >= 2, final
    assert "lost" not in text

    records = by_description(ledger(project, "t1"))
    assert set(records) == {"Fix the typo", "Rewrite the notes"}
    assert {r["status"] for r in records.values()} == {"completed"}
    # The rejection's reason reached the child as the Edit's result.
    assert "The user rejected this call: keep the notes lower-case" in records["Rewrite the notes"]["result"]
    assert "keep the notes lower-case" not in records["Fix the typo"]["result"]
    assert "rejected" not in records["Fix the typo"]["result"]

    tasks = cli("tasks", "t1", cwd=project)
    assert tasks.returncode == 0, tasks.stderr
    assert tasks.stdout.count("completed") >= 2 and "lost" not in tasks.stdout


def test_yes_approves_a_background_edit(project):
    result = cli("run", "Tidy the notes", "--thread", "t1", "--yes",
                 "--model", "scripted:cli_background_scripts:one_background_edit", cwd=project, env=SCRIPTS)
    assert result.returncode == 0, result.stderr
    assert "approved Edit (editor) — --yes" in result.stdout
    assert (project / "notes.txt").read_text() == FIXED
    (record,) = ledger(project, "t1").values()
    assert record["status"] == "completed", record
    assert "rejected" not in record["result"]


def test_a_background_approval_without_a_terminal_is_an_error_naming_the_tool(project):
    result = cli("run", "Tidy the notes", "--thread", "t1",
                 "--model", "scripted:cli_background_scripts:one_background_edit", cwd=project, env=SCRIPTS)
    assert result.returncode == 1
    assert ("Edit (called by editor, a background task) needs approval, but stdin is not a terminal"
            in result.stderr), result.stderr
    assert "--yes" in result.stderr and "Traceback" not in result.stderr
    assert (project / "notes.txt").read_text() == ORIGINAL
    # The ledger says what the task was doing when the run stopped, not that it vanished.
    (record,) = ledger(project, "t1").values()
    assert record["status"] == "waiting_for_approval", record
