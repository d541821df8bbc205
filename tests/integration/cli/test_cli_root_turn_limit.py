"""``deep-agent run`` with a root model that never stops calling tools ends on ``max_root_turns``."""

from __future__ import annotations

from pathlib import Path

from helpers.cli import ANSI, SCRIPTS, cli, make_project

from subagents._settings import DEFAULT_MAX_ROOT_TURNS


def test_a_root_that_calls_tools_forever_ends_with_the_limit_message_not_a_recursion_error(tmp_path: Path) -> None:
    # The run's step limit must leave room for every turn max_root_turns allows, or a looping model
    # ends on LangGraph's recursion limit, as an error, long before the limit that answers.
    project = make_project(tmp_path)

    done = cli("run", "Read the notes.", "--model", "scripted:cli_scripts:reads_forever", cwd=project, env=SCRIPTS)

    out = ANSI.sub("", done.stdout + done.stderr)
    assert "Recursion limit" not in out
    assert done.returncode == 0, out[-2000:]
    assert f"max_root_turns={DEFAULT_MAX_ROOT_TURNS}" in out
