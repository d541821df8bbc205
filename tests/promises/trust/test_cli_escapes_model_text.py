"""Everything the CLI prints from a model is escaped: no sequence in it reaches the terminal.

A model's answer may hold a clear-screen, an OSC 52 clipboard write, an OSC 8
link with a hidden target, a one-byte C1 CSI, a bell, backspaces and a
carriage return that overwrites a line, or a bidi override. ``deep-agent
run`` prints the root's final answer, ``tasks`` and ``transcript`` read it
back, and the approval prompt shows a model's call: each shows these
characters as visible escapes (``\\x1b``) and keeps the model's newlines.
"""

from __future__ import annotations

import pytest
from helpers.cli import SCRIPTS, cli
from helpers.scripted.trust_scripts import HOSTILE, HOSTILE_AGENT, RAW

from deep_agent.cli.approvals import describe_call
from deep_agent.cli.terminal import printable


@pytest.fixture()
def project(tmp_path):
    (tmp_path / "home").mkdir()
    return tmp_path


def test_run_prints_the_roots_final_answer_escaped(project):
    run = cli("run", "go", "--thread", "t-raw", "--model", "scripted:trust_scripts:hostile_root", cwd=project,
              env=dict(SCRIPTS))
    assert run.returncode == 0, run.stderr
    leaked = [c for c in RAW if c in run.stdout]
    assert leaked == [], run.stdout
    assert "first line\n" in run.stdout
    for visible in ("\\x1b[2J", "\\x1b]52;c;ZWNobyBwd25lZA==\\x07", "\\x1b]8;;http://evil.example/", "\\x9b31m",
                    "\\x08back\\rover\\u202eflipped"):
        assert visible in run.stdout, run.stdout


def test_a_model_chosen_agent_name_is_escaped_in_the_run_and_in_tasks(project):
    run = cli("run", "go", "--thread", "t-name", "--model", "scripted:trust_scripts:hostile_agent_name",
              cwd=project, env=dict(SCRIPTS))
    assert run.returncode == 0, run.stderr
    tasks = cli("tasks", "t-name", cwd=project)
    assert tasks.returncode == 0, tasks.stderr
    for out in (run.stdout, tasks.stdout):
        assert [c for c in RAW if c in out] == [], out
    # Shown as text, escapes visible, "[bold]" not read as markup (the summary table is one line a row).
    assert printable(HOSTILE_AGENT) in run.stdout, run.stdout


def test_printable_keeps_lines_and_tabs_and_escapes_the_rest():
    shown = printable(HOSTILE, lines=True)
    assert not [c for c in RAW if c in shown]
    assert shown.startswith("first line\n") and "\tend" in shown


def test_the_approval_prompt_shows_a_models_call_escaped():
    shown = describe_call("rese\x1b[2Jarcher", "Bash", {"command": HOSTILE, "why": {"x": "\x1b]52;c;AA==\x07"}})
    assert not [c for c in RAW if c in shown]
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in shown and "rese\\x1b[2Jarcher" in shown
