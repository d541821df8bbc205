"""The deep-agent CLI through its real entry point, in a subprocess."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.cli import SCRIPTS, cli

@pytest.fixture()
def project(tmp_path: Path) -> Path:
    agents = tmp_path / ".agents" / "agents"
    agents.mkdir(parents=True)
    (agents / "researcher.md").write_text(
        "---\nname: researcher\ndescription: Researches one topic.\nmax_turns: 4\n---\n"
        "Research the topic and answer in one line.\n",
        encoding="utf-8",
    )
    (tmp_path / "home").mkdir()
    return tmp_path


def test_demo_runs_offline_and_says_it_is_scripted(project):
    result = cli("demo", cwd=project)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Scripted demo" in out and "no real LLM" in out
    assert out.count("completed") >= 2 and "error" in out
    assert "upstream model returned HTTP 500" in out
    assert "Final answer" in out and "not fatal" in out
    assert "writer [background, local, attempt 1]" in out and "waiting for 1 background task" in out
    assert re.search(r"writer \[background, local, attempt 1\] +\w{8} +completed", out)
    assert "The background report arrived" in out


def test_run_then_tasks_and_transcript_read_the_sqlite_state(project):
    run = cli("run", "Compare LangGraph and Pydantic.", "--thread", "t-cli", cwd=project,
              env={"DEEP_AGENT_SCRIPTED": "1"})
    assert run.returncode == 0, run.stderr
    assert "researcher" in run.stdout and "Final answer" in run.stdout
    assert (project / ".deep_agent" / "state.sqlite").exists()

    tasks = cli("tasks", cwd=project)  # the last thread run here
    assert tasks.returncode == 0, tasks.stderr
    assert "tasks of thread t-cli" in tasks.stdout
    assert tasks.stdout.count("researcher") == 3
    assert "completed" in tasks.stdout and "error" in tasks.stdout

    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    from deep_agent.cli._store import read_thread

    with sqlite3.connect(project / ".deep_agent" / "state.sqlite") as conn:
        ledger = read_thread(SqliteSaver(conn), "t-cli")["subagent_tasks"]
    task_id = next(t for t, r in ledger.items() if r["status"] == "completed")
    shown = cli("transcript", task_id[:10], cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert f"task {task_id}" in shown.stdout
    assert "human:" in shown.stdout and "ai:" in shown.stdout
    assert ledger[task_id]["result"].split(":")[0] in shown.stdout

    again = cli("run", "Compare LangGraph and Pydantic.", "--thread", "t-cli", cwd=project,
                env={"DEEP_AGENT_SCRIPTED": "1"})
    assert again.returncode == 0, again.stderr
    assert cli("tasks", "t-cli", cwd=project).stdout.count("researcher") == 6


def test_without_a_model_the_message_says_how_to_configure_one(project):
    result = cli("run", "hello", cwd=project)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    line = result.stderr.strip()
    assert line.count("\n") == 0
    assert "no chat model is configured" in line and "OPENAI_API_KEY" in line and "deep-agent demo" in line


def test_errors_are_one_line_and_debug_shows_the_traceback(project):
    quiet = cli("transcript", "nosuchtask", cwd=project)
    assert quiet.returncode == 1 and "Traceback" not in quiet.stderr
    assert "deep-agent: error:" in quiet.stderr
    loud = cli("--debug", "tasks", "nothread", cwd=project)
    assert loud.returncode != 0 and "Traceback" in loud.stderr


def test_a_childs_escape_sequences_never_reach_the_terminal(project):
    from helpers.scripted.cli_scripts import HOSTILE_ANSWER

    env = dict(SCRIPTS)
    run = cli("run", "go", "--thread", "t-esc", "--model", "scripted:cli_scripts:hostile_child", cwd=project, env=env)
    assert run.returncode == 0, run.stderr
    tasks = cli("tasks", "t-esc", cwd=project)
    task_id = re.search(r"(\w{8}) \W+ researcher \W+ task ", tasks.stdout).group(1)
    shown = cli("transcript", task_id, "--thread", "t-esc", cwd=project)
    assert shown.returncode == 0, shown.stderr
    for out in (run.stdout, tasks.stdout, shown.stdout):
        assert not set(out) & {"\x1b", "\x07", "\r", "\u202e"}, out
    # The answer's lines stay lines; its escapes are written out, visibly.
    assert "ai: line one\n\\x1b[2J\\x1b]0;pwned\\x07cleared\\rover\\u202eline two" in shown.stdout
    assert HOSTILE_ANSWER.split("\n")[0] in shown.stdout
