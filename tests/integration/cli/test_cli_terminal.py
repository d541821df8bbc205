"""``deep-agent run`` in a pseudo-terminal, as a person uses it on Claude-style agent files.

The run uses a scripted model (``--model scripted:cli_scripts:review_team``):
the root delegates two edits to an ``editor`` (``model: sonnet``, ``tools:
Read, Grep, Edit``), one task to an agent that does not exist, one call with
invalid arguments, and a background survey. The person approves one ``Edit``
and rejects the other with a reason.
"""

from __future__ import annotations

import io
import re
import time
from pathlib import Path
from typing import Any

import pexpect

from helpers.cli import ANSI, entry_point, make_project, program, terminal_env


def spawn_run(project: Path, prompt: str, script: str) -> tuple[Any, io.StringIO]:
    """`deep-agent run PROMPT` on the scripted model ``cli_scripts:SCRIPT`` in a pseudo-terminal, and its screen."""
    screen = io.StringIO()
    command, *args = entry_point()
    child = pexpect.spawn(command, [*args, "run", prompt, "--model", f"scripted:cli_scripts:{script}"],
                          cwd=str(project), env=terminal_env(project), dimensions=(60, 200),
                          encoding="utf-8", timeout=40)
    child.logfile_read = screen
    return child, screen


def test_a_terminal_run_asks_before_edits_and_shows_timers_refusals_background_and_summary(tmp_path):
    project = make_project(tmp_path)
    child, screen = spawn_run(project, "Tidy the notes", "review_team")
    answers = {}
    for _ in range(2):
        child.expect(r"editor wants to call Edit")
        child.expect(r"old_string: (\w+)")
        old = child.match.group(1)
        child.expect(r"Approve\? \[y\]es / \[n\]o / \[a\]lways: ")
        if old == "teh":
            child.sendline("y")
        else:
            child.sendline("n")
            child.expect_exact("Reason (the agent reads it): ")
            child.sendline("keep the notes lower-case")
        answers[old] = True
    child.expect(pexpect.EOF)
    child.close()
    text = ANSI.sub("", screen.getvalue())
    assert child.exitstatus == 0, text[-3000:]
    assert set(answers) == {"teh", "notes"}

    # The approved edit ran, the rejected one did not.
    assert (project / "notes.txt").read_text() == "These are the notes of the project.\n"
    assert "rejected Edit (editor): keep the notes lower-case" in text
    # One notice each for the Claude aliases and the tool no built-in provides.
    assert "models haiku (surveyor) and sonnet (editor) run on the run's model" in text
    assert "no built-in tool provides WebFetch (surveyor)" in text
    # The timer moves while the run goes on.
    timers = {float(t) for t in re.findall(r"deep agent  running (\d+\.\d)s", text)}
    assert len(timers) >= 3 and max(timers) - min(timers) >= 0.3, sorted(timers)
    # Refused calls and the background task are in the tree.
    assert re.search(r"translator \[refused\] +\w{8} +error .*unknown subagent_type 'translator'", text)
    assert re.search(r"(\?|\(unknown\)) \[refused\] .*error .*invoking tool 'task'", text)  # invalid arguments
    assert re.search(r"surveyor \[background, local, attempt 1\] +\w{8} +completed", text)
    assert re.search(r"✓ editor +\w{8} +completed", text)
    # The summary: the root, each agent type, the total, and no made-up cost.
    summary = text[text.index("summary"):]
    for row in ("(root)", "editor", "surveyor", "translator", "total"):
        assert re.search(rf"│ {re.escape(row)} +│", summary), row
    assert re.search(r"│ editor +│ +2 │ +[2-9] │", summary)
    assert "–" in summary and "0.0000" not in summary

    # The same tasks are in `tasks`, and each has a transcript or says why not.
    env = terminal_env(project)
    tasks = program("tasks", cwd=project, env=env, timeout=120)
    assert tasks.returncode == 0, tasks.stderr
    for needle in ("editor", "translator", "refused", "background local #1", "surveyor", "completed"):
        assert needle in tasks.stdout, needle
    survey_id = re.search(r"│ (\w{8}) +│ surveyor", tasks.stdout).group(1)
    shown = program("transcript", survey_id, cwd=project, env=env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "Survey the notes" in shown.stdout and "Survey: notes.txt mentions the project." in shown.stdout
    refused_id = re.search(r"│ (\w{8}) +│ translator", tasks.stdout).group(1)
    refused = program("transcript", refused_id, cwd=project, env=env, timeout=120)
    assert refused.returncode == 0 and "it ran no child" in refused.stdout


def test_ctrl_c_at_the_approval_prompt_ends_the_run_at_once_and_approves_nothing(tmp_path):
    project = make_project(tmp_path)
    child, screen = spawn_run(project, "Fix the typo", "one_edit")
    child.expect(r"Approve\? \[y\]es / \[n\]o / \[a\]lways: ")
    child.sendintr()
    # Before the fix the first Ctrl-C waited for an answer: this catches that hang, not a speed.
    child.expect(pexpect.EOF, timeout=20)
    child.close()
    text = ANSI.sub("", screen.getvalue())
    assert child.exitstatus == 130, text[-2000:]
    assert "deep-agent: interrupted" in text and "approved" not in text
    assert (project / "notes.txt").read_text() == "These are teh notes of the project.\n"


def test_a_child_cut_short_at_its_approval_prompt_is_cancelled_and_keeps_what_it_spent(tmp_path):
    project = make_project(tmp_path)
    child, screen = spawn_run(project, "Tidy the notes", "one_edit")  # the editor asks to Edit
    child.expect(r"editor wants to call Edit")
    child.expect(r"Approve\? \[y\]es / \[n\]o / \[a\]lways: ")
    child.sendintr()
    child.expect(pexpect.EOF, timeout=20)
    child.close()
    text = ANSI.sub("", screen.getvalue())
    assert child.exitstatus == 130, text[-2000:]
    tasks = program("tasks", cwd=project, env=terminal_env(project), timeout=120)
    # Its one model call and its tokens, as the tree showed them (before: 0 tokens).
    shown = re.findall(r"editor +\w{8} +waiting_for_approval .* (\d+) tokens", text)
    found = re.search(r"│ \w{8} +│ editor +│ task +│ cancelled +│ [^│]+│ 1 +│ (\d+) +│", tasks.stdout)
    assert shown and found and found.group(1) == shown[-1] != "0", (shown, tasks.stdout)


def test_a_tasks_time_counts_its_work_before_and_after_an_approval_and_its_wait_apart(tmp_path):
    project = make_project(tmp_path)
    child, screen = spawn_run(project, "Tidy the notes", "paced_one_edit")  # every model call: 0.5 s
    child.expect(r"Approve\? \[y\]es / \[n\]o / \[a\]lways: ")
    time.sleep(1.5)  # the person reads the call
    child.sendline("y")
    child.expect(pexpect.EOF)
    child.close()
    text = ANSI.sub("", screen.getvalue())
    assert child.exitstatus == 0, text[-3000:]
    # The editor's two model calls (one before the pause, one after) are its work; the pause is shown apart.
    done = re.findall(r"editor +\w{8} +completed +(\d+\.\d)s \+ (\d+\.\d)s waiting", text)
    assert done, text[-3000:]
    work, waiting = map(float, done[-1])
    assert work >= 0.9 and waiting >= 1.4, (work, waiting)
    summary = text[text.index("summary"):]
    assert re.search(r"│ editor +│ +1 │ +2 │ +\d+ │ +\d+\.\ds \+ \d+\.\ds waiting │", summary), summary
    tasks = program("tasks", cwd=project, env=terminal_env(project), timeout=120)
    assert re.search(r"editor .* completed .* (\d+\.\d)s \+ (\d+\.\d)s waiting", tasks.stdout), tasks.stdout


def test_a_task_cut_short_by_ctrl_c_is_listed_as_cancelled_and_its_transcript_can_be_read(tmp_path):
    project = make_project(tmp_path)
    child, screen = spawn_run(project, "Look around", "slow_child")  # every model call: 2 s
    # Its first model call has started ("turn 1"): the record then counts that call, cut short.
    child.expect(r"editor(?:\x1b\[[0-9;]*m| )+\w{8}(?:\x1b\[[0-9;]*m| )+running[^\n]*turn 1")
    child.sendintr()
    child.expect(pexpect.EOF, timeout=30)
    child.close()
    text = ANSI.sub("", screen.getvalue())
    assert child.exitstatus == 130, text[-2000:]
    # The live tree's last frame says what the record will: the child was cancelled, the run interrupted.
    last_frame = text[text.rindex("deep agent  "):]
    assert last_frame.startswith("deep agent  interrupted"), last_frame
    assert re.search(r"editor +\w{8} +cancelled", last_frame) and " running " not in last_frame, last_frame

    env = terminal_env(project)
    tasks = program("tasks", cwd=project, env=env, timeout=120)
    assert tasks.returncode == 0, tasks.stderr
    found = re.search(r"│ (\w{8}) +│ editor +│ task +│ cancelled +│ [^│]+│ 1 +│", tasks.stdout)
    assert found, tasks.stdout  # its one model call (cut short) is counted
    shown = program("transcript", found.group(1), cwd=project, env=env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "cancelled" in shown.stdout and "Survey the notes slowly." in shown.stdout, shown.stdout


def test_always_at_the_approval_prompt_approves_that_tool_for_the_rest_of_the_run_only(tmp_path):
    project = make_project(tmp_path)
    child, screen = spawn_run(project, "Tidy the notes", "two_edits_and_a_write")
    child.expect(r"wants to call Edit")
    child.expect_exact("a: approve Edit for the rest of this run")  # the help line says what "a" does
    child.expect(r"Approve\? \[y\]es / \[n\]o / \[a\]lways: ")
    child.sendline("a")
    # The second Edit is not asked about; the Write, another tool, is.
    child.expect(r"wants to call (\w+)")
    assert child.match.group(1) == "Write"
    child.expect(r"Approve\? \[y\]es / \[n\]o / \[a\]lways: ")
    child.sendline("y")
    child.expect(pexpect.EOF)
    child.close()
    text = ANSI.sub("", screen.getvalue())
    assert child.exitstatus == 0, text[-3000:]
    assert text.count("wants to call Edit") == 1 and "approved Edit (the root agent) — always, this run" in text
    assert (project / "notes.txt").read_text() == "These are the notes of the repository.\n"
    assert (project / "new.txt").read_text() == "new\n"

    # Never remembered: the next run asks about Edit again.
    (project / "notes.txt").write_text("These are teh notes of the project.\n")
    again, _ = spawn_run(project, "Tidy the notes", "two_edits_and_a_write")
    again.expect(r"wants to call Edit")
    again.expect(r"Approve\? \[y\]es / \[n\]o / \[a\]lways: ")
    again.sendintr()
    again.expect(pexpect.EOF, timeout=20)
    again.close()
