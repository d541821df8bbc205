"""``deep-agent run`` and friends without a terminal: approvals, failures, exit codes, state paths."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import REPO as ROOT
from helpers.cli import SCRIPTS, cli, make_project, program
from helpers.processes import until_nothing_works_in, working_in


def run(project: Path, *args: str, stdin: str | None = None, cwd: Path | None = None):
    return cli("run", *args, cwd=cwd or project, env=SCRIPTS, **({"stdin": stdin} if stdin is not None else {}))


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def thread_messages(state: Path, thread: str) -> list:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    from deep_agent._factory import saved_messages

    with sqlite3.connect(state / "state.sqlite") as conn:
        saver = SqliteSaver(conn)
        saved = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        return saved_messages(saver, saved) if saved else []


def test_a_pending_approval_without_a_terminal_is_an_error_naming_the_tool(project):
    # A run that waited for an answer no terminal can give would never end: cli()'s timeout is the hang guard.
    result = run(project, "Tidy the notes", "--model", "scripted:cli_scripts:one_edit")
    assert result.returncode == 1
    assert "Edit (called by editor) needs approval, but stdin is not a terminal" in result.stderr
    assert "--yes" in result.stderr and "Traceback" not in result.stderr
    assert (project / "notes.txt").read_text() == "These are teh notes of the project.\n"


def test_yes_approves_every_risky_call(project):
    result = run(project, "Tidy the notes", "--model", "scripted:cli_scripts:one_edit", "--yes")
    assert result.returncode == 0, result.stderr
    assert "approved Edit (editor) — --yes" in result.stdout
    assert (project / "notes.txt").read_text() == "These are the notes of the project.\n"


def test_permission_mode_never_confirm_runs_edits_without_asking(project):
    result = run(project, "Tidy the notes", "--model", "scripted:cli_scripts:one_edit",
                 "--permission-mode", "bypassPermissions")
    assert result.returncode == 0, result.stderr
    assert "approved" not in result.stdout
    assert (project / "notes.txt").read_text() == "These are the notes of the project.\n"


def test_a_failed_run_leaves_the_thread_as_it_was(project):
    failed = run(project, "first", "--thread", "t1", "--model", "scripted:cli_scripts:failing_root")
    assert failed.returncode == 1 and "upstream model returned HTTP 500" in failed.stderr
    assert "deep agent  failed" in failed.stdout
    assert thread_messages(project / ".deep_agent", "t1") == []
    ok = run(project, "Tidy the notes", "--thread", "t1", "--model", "scripted:cli_scripts:one_edit", "--yes")
    assert ok.returncode == 0, ok.stderr
    kinds = [m.type for m in thread_messages(project / ".deep_agent", "t1")]
    assert kinds[0] == "human" and kinds.count("human") == 1
    assert all(not (a == b == "human") for a, b in zip(kinds, kinds[1:]))


def test_a_budget_refusal_appears_in_the_tree_and_in_tasks(project):
    # Room for the parent's calls but not the child's: a budget too small for the parent's own first call
    # ends the run before it delegates (the shared budget bounds the whole tree).
    result = run(project, "Tidy the notes", "--model", "scripted:cli_scripts:one_edit", "--budget-tokens", "3000")
    assert result.returncode == 0, result.stderr
    editor = [line for line in result.stdout.splitlines() if "editor" in line and "budget" in line]
    assert editor and "error" in editor[0], result.stdout
    tasks = cli("tasks", "--format", "json", cwd=project)
    assert '"agent_type": "editor"' in tasks.stdout and "budget cannot cover" in tasks.stdout, tasks.stdout


def test_the_summary_shows_cost_when_prices_are_given(project):
    prices = project / "prices.yaml"
    prices.write_text("scripted: [1000, 2000]\n", encoding="utf-8")
    result = run(project, "Tidy the notes", "--model", "scripted:cli_scripts:one_edit", "--yes",
                 "--prices", str(prices))
    assert result.returncode == 0, result.stderr
    summary = result.stdout[result.stdout.index("summary"):]
    assert "$" in summary and "–" not in summary


@pytest.mark.parametrize("args, message", [
    (["--agents-dir", "nope"], "--agents-dir nope: no such directory"),
    (["--workspace", "nope"], "--workspace nope: no such directory"),
    (["--model-profiles", "nope.yaml"], "--model-profiles nope.yaml: cannot be read"),
    (["--prices", "nope.yaml"], "--prices nope.yaml: cannot be read"),
    (["--state-dir", "notes.txt/state"], "--state-dir"),
    (["--timeout", "0"], "expected a positive number"),
])
def test_bad_arguments_exit_2_with_one_line(project, args, message):
    result = run(project, "hi", "--model", "scripted", *args)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert message in result.stderr.strip().splitlines()[-1]  # argparse prints its usage above


def test_an_invalid_agent_file_under_strict_agents_exits_1_with_the_flags_that_fix_it(project):
    (project / ".claude/agents/odd.md").write_text(
        "---\nname: odd\ndescription: d\nmodel: gpt5-turbo\n---\nbody\n", encoding="utf-8")
    result = run(project, "hi", "--model", "scripted", "--strict-agents")
    assert result.returncode == 1
    assert "odd.md" in result.stderr and "--model-profiles FILE" in result.stderr
    assert "--unknown-model inherit" in result.stderr and "model_profiles=" not in result.stderr
    ok = run(project, "hi", "--model", "scripted", "--unknown-model", "inherit")
    assert ok.returncode == 0, ok.stderr
    assert "gpt5-turbo (odd)" in ok.stdout


def test_debug_works_before_or_after_the_subcommand(project):
    for argv in (["--debug", "tasks", "nothread"], ["tasks", "nothread", "--debug"]):
        loud = cli(*argv, cwd=project)
        assert loud.returncode == 1 and "Traceback" in loud.stderr


def test_reading_commands_that_fail_create_no_state_folder(tmp_path):
    for argv in (["tasks"], ["tasks", "t1"], ["transcript", "abc"]):
        result = cli(*argv, cwd=tmp_path)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert not (tmp_path / ".deep_agent").exists()


def test_a_relative_state_dir_stores_paths_that_work_from_anywhere(project, tmp_path):
    result = cli("demo", "--state-dir", "st", cwd=project)
    assert result.returncode == 0, result.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state = str(project / "st")
    tasks = cli("tasks", "--state-dir", state, cwd=elsewhere)
    assert tasks.returncode == 0, tasks.stderr
    import re

    task_id = re.search(r"│ (\w{8}) +│ researcher +│ task +│ completed", tasks.stdout).group(1)
    shown = cli("transcript", task_id, "--state-dir", state, cwd=elsewhere)
    assert shown.returncode == 0, shown.stderr
    assert f"jsonl:{project / 'st'}" in shown.stdout.replace("\n", "")


def test_a_connection_error_names_the_url_tried(project):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**SCRIPTS, "OPENAI_API_KEY": "none", "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"}
    result = cli("run", "hi", "--timeout", "2", cwd=project, env=env)
    assert result.returncode == 1
    line = result.stderr.strip()
    assert "Traceback" not in line and f"127.0.0.1:{port}" in line and "cannot reach the model server" in line


def test_help_does_not_load_langchain():
    code = ("import sys; from deep_agent.cli._app import build_parser; build_parser(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('langchain', 'langgraph', 'rich')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_hung_model_server_is_an_error_after_the_timeout_not_a_frozen_screen(project):
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept_and_never_answer() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept_and_never_answer, daemon=True)
    thread.start()
    try:
        env = {**SCRIPTS, "OPENAI_API_KEY": "none", "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"}
        result = cli("run", "hi", "--timeout", "1", cwd=project, env=env)
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()
    assert result.returncode == 1
    line = result.stderr.strip()
    assert "Traceback" not in line and "did not answer in time" in line and f"127.0.0.1:{port}" in line


def test_run_reads_the_default_skill_folders_and_rejects_an_unknown_skill(project):
    skill = project / ".agents/skills/tidy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: tidy\ndescription: How to tidy notes.\n---\nFix typos.\n",
                                    encoding="utf-8")
    editor = project / ".claude/agents/editor.md"
    editor.write_text(editor.read_text().replace("color: cyan", "color: cyan\nskills: tidy"), encoding="utf-8")
    ok = run(project, "Tidy the notes", "--model", "scripted:cli_scripts:one_edit", "--yes")
    assert ok.returncode == 0, ok.stderr
    editor.write_text(editor.read_text().replace("skills: tidy", "skills: nosuch"), encoding="utf-8")
    bad = run(project, "Tidy the notes", "--model", "scripted:cli_scripts:one_edit", "--yes", "--strict-agents")
    assert bad.returncode == 1 and "field 'skills'" in bad.stderr and "nosuch" in bad.stderr
    skipped = run(project, "Tidy the notes", "--model", "scripted:cli_scripts:one_edit", "--yes")
    assert skipped.returncode == 0, skipped.stderr
    assert "warning: skipped" in skipped.stderr and "editor.md" in skipped.stderr and "nosuch" in skipped.stderr


def test_tasks_without_a_thread_reads_the_last_thread_back_exactly_and_a_bad_id_is_refused(project):
    ok = run(project, "Tidy the notes", "--thread", " t1 ", "--model", "scripted:cli_scripts:one_edit", "--yes")
    assert ok.returncode == 0, ok.stderr
    tasks = cli("tasks", cwd=project)
    assert tasks.returncode == 0, tasks.stderr
    assert "tasks of thread  t1 " in tasks.stdout
    not_utf8 = os.fsdecode(b"bad\xff")  # what a shell passes for bytes that are not UTF-8
    bad = run(project, "Tidy the notes", "--thread", not_utf8, "--model", "scripted:cli_scripts:one_edit", "--yes")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "--thread" in bad.stderr and "UTF-8" in bad.stderr
    assert (project / ".deep_agent" / "last_thread").read_bytes() == b" t1 "
    assert (project / "notes.txt").read_text() == "These are the notes of the project.\n"


def test_a_thread_id_that_looks_like_markup_is_shown_as_it_is_and_never_breaks_a_command(project):
    """Rich read '[/1]' as a closing tag: `tasks` and `run`'s last line failed, and '[red]' was eaten."""
    for thread in ("run[/1]", "abc[red]"):
        ok = run(project, "Tidy the notes", "--thread", thread, "--model", "scripted:cli_scripts:one_edit", "--yes")
        assert ok.returncode == 0 and f"--thread {thread}" in ok.stdout, ok.stderr
        for argv in (("tasks", thread), ("tasks",)):
            tasks = cli(*argv, cwd=project)
            assert tasks.returncode == 0 and f"tasks of thread {thread}" in tasks.stdout, tasks.stderr


@pytest.mark.parametrize("signals", [[15], [1]], ids=["SIGTERM", "SIGHUP"])
def test_a_run_ended_by_a_signal_still_ends_the_bash_command_it_is_running(project, signals):
    """Jobs a command starts end with the command (its sandbox's PID namespace); a signal to the run
    ends the running command at once."""
    from helpers.cli import home_beside, started

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEEP_AGENT_"))}
    env.update({"HOME": str(home_beside(project)), "PYTHONPATH": SCRIPTS["PYTHONPATH"]})
    with started("run", "start it", "--yes", "--model", "scripted:cli_scripts:bash_long_command", cwd=project,
                 env=env) as (pid, ended):
        stop = time.monotonic() + 60
        # Until the command sleeps, seen working in the project as the wait below looks for it.
        while not any(line.startswith(b"sleep\0") for line in working_in(project)):
            with contextlib.suppress(subprocess.TimeoutExpired):  # a run that ended first: its error
                pytest.fail(ended(0.1).stderr)
            assert time.monotonic() < stop
        for signum in signals:
            os.kill(pid, signum)
            time.sleep(0.1)
        assert ended(30).returncode == 128 + signals[0]
    until_nothing_works_in(project)  # a command that outlived the run touches job.late first
    assert not (project / "job.late").exists(), "the command outlived the run"


def test_notes_about_the_agent_files_show_once_per_change_and_quiet_shows_none(project):
    alias_note = "note: models haiku (surveyor) and sonnet (editor) run on the run's model"
    first = run(project, "Hello", "--model", "scripted:cli_scripts:answer_only")
    assert first.returncode == 0, first.stderr
    assert alias_note in first.stdout and "no built-in tool provides WebFetch" in first.stdout
    again = run(project, "Hello", "--model", "scripted:cli_scripts:answer_only")
    # (A note about this run, such as Bash being off where bubblewrap is missing, shows on every run.)
    assert again.returncode == 0, again.stderr
    assert alias_note not in again.stdout and "no built-in tool provides" not in again.stdout, again.stdout
    assert (project / "home" / ".config" / "deep-agent" / "seen-notes.json").is_file()
    assert not (project / ".deep_agent" / "seen-notes.json").exists()  # never in the folder: the checkout's

    surveyor = project / ".claude" / "agents" / "surveyor.md"
    surveyor.write_text(surveyor.read_text() + "Be brief.\n")
    quiet = run(project, "Hello", "--model", "scripted:cli_scripts:answer_only", "--quiet")
    assert quiet.returncode == 0 and "note:" not in quiet.stdout, quiet.stdout
    changed = run(project, "Hello", "--model", "scripted:cli_scripts:answer_only")
    assert alias_note in changed.stdout, changed.stdout


def test_tasks_through_a_pipe_prints_whole_words_and_json_is_one_document(project):
    done = run(project, "Tidy the notes", "--model", "scripted:cli_scripts:one_edit", "--yes")
    assert done.returncode == 0, done.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEEP_AGENT_")) and k != "COLUMNS"}
    env.update({"HOME": str(project / "home"), "PYTHONPATH": str(ROOT)})
    piped = program("tasks", "--full", cwd=project, env=env, timeout=180)
    assert piped.returncode == 0, piped.stderr
    assert max(len(line) for line in piped.stdout.splitlines()) <= 80, piped.stdout
    assert "Fixed the typo in notes.txt." in piped.stdout and "completed" in piped.stdout.split()
    as_json = cli("tasks", "--format", "json", cwd=project)
    assert as_json.returncode == 0, as_json.stderr
    (task,) = json.loads(as_json.stdout)["tasks"]
    assert task["agent_type"] == "editor" and task["status"] == "completed"
    assert task["result"] == "Fixed the typo in notes.txt." and task["model_calls"] == 2


def test_bad_agent_files_are_skipped_with_one_warning_each_all_at_once(project):
    agents = project / ".claude/agents"
    (agents / "odd.md").write_text("---\nname: odd\ndescription: d\nmodel: gpt5-turbo\n---\nbody\n",
                                   encoding="utf-8")
    (agents / "broken.md").write_text("---\nname: broken\ndescription: [unclosed\n---\nbody\n", encoding="utf-8")
    (agents / "counted.md").write_text("---\nname: counted\ndescription: d\nmaxTurns: lots\n---\nbody\n",
                                       encoding="utf-8")
    result = run(project, "Tidy the notes", "--model", "scripted:cli_scripts:one_edit", "--yes")
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: skipped")]
    assert len(warnings) == 3, result.stderr  # every bad file in the first run, not one batch per run
    for name in ("odd.md", "broken.md", "counted.md"):
        assert sum(name in line for line in warnings) == 1, (name, warnings)
    assert "gpt5-turbo" in next(line for line in warnings if "odd.md" in line)
    # The good files still run: the editor made its edit.
    assert (project / "notes.txt").read_text() == "These are the notes of the project.\n"
    strict = run(project, "Tidy the notes", "--model", "scripted:cli_scripts:one_edit", "--yes", "--strict-agents")
    assert strict.returncode == 1 and "3 invalid agent files" in strict.stderr, strict.stderr
