"""The state folder is data: the CLI reads only regular files inside it, follows no symlink in it, bounds each read.

A checkout can hold its own ``.deep_agent/``, and a record in its
checkpoints names the transcript file to read. Every read the CLI makes of
it (the last thread's id, the SQLite checkpoints, a JSONL transcript) goes
through ``state_file``: a symlink anywhere below the state folder, a pipe or
a file too big is an error naming the file, never followed, waited on or
loaded. A folder the CLI creates gets a ``.gitignore`` of ``*``.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from helpers.cli import cli

from deep_agent.cli._store import (
    GITIGNORE,
    MAX_STATE_FILE_BYTES,
    StateFileError,
    read_state_file,
    read_thread,
    resolve_state_dir,
)

SECRET = "the-secret-outside"
SCRIPTED = {"DEEP_AGENT_SCRIPTED": "1"}


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def make_project(folder: Path) -> Path:
    root = folder / "project"
    agents = root / ".agents" / "agents"
    agents.mkdir(parents=True)
    (agents / "researcher.md").write_text(
        "---\nname: researcher\ndescription: Researches one topic.\nmax_turns: 4\n---\nAnswer in one line.\n",
        encoding="utf-8")
    (root / "home").mkdir()
    (folder / "secret.txt").write_text(SECRET + "\n")
    return root


def ran(project: Path) -> tuple[str, Path]:
    """A run's completed task: its id and its JSONL transcript."""
    run = cli("run", "Compare LangGraph and Pydantic.", "--thread", "t-data", cwd=project, env=SCRIPTED)
    assert run.returncode == 0, run.stderr
    from langgraph.checkpoint.sqlite import SqliteSaver

    with sqlite3.connect(project / ".deep_agent" / "state.sqlite") as conn:
        ledger = read_thread(SqliteSaver(conn), "t-data")["subagent_tasks"]
    task_id, record = next((t, r) for t, r in ledger.items() if r["status"] == "completed")
    path = Path(record["transcript"].removeprefix("jsonl:"))
    assert path.is_file() and path.is_relative_to(project / ".deep_agent")
    return task_id, path


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """One project after ``ran``, made once and kept aside (a run is a process): its folder, task id, transcript."""
    folder = tmp_path_factory.mktemp("ran")
    task_id, path = ran(make_project(folder / "work"))
    shutil.copytree(folder / "work", folder / "kept", symlinks=True)
    return folder, task_id, path


@pytest.fixture()
def after_a_run(one_run: tuple[Path, str, Path]) -> tuple[Path, str, Path]:
    """A project just after ``ran`` (project, task id, transcript): the one run's folder, put back as it was at
    the same place (its records name their paths)."""
    folder, task_id, path = one_run
    shutil.rmtree(folder / "work")
    shutil.copytree(folder / "kept", folder / "work", symlinks=True)
    return folder / "work" / "project", task_id, path


AFTER_A_RUN = pytest.mark.xdist_group("state-folder-after-a-run")  # the tests sharing one run: on one worker


def refused(result: subprocess.CompletedProcess, path: Path, reason: str) -> None:
    assert result.returncode == 1, result.stdout
    assert f"deep-agent: error: {path}: {reason}" in result.stderr, result.stderr
    assert SECRET not in result.stdout + result.stderr


@AFTER_A_RUN
def test_a_transcript_replaced_by_a_symlink_out_is_not_followed(after_a_run):
    project, task_id, path = after_a_run
    path.unlink()
    path.symlink_to(project.parent / "secret.txt")
    refused(cli("transcript", task_id, cwd=project), path, "a symlink stands on its path")


@AFTER_A_RUN
def test_a_symlinked_folder_below_the_state_folder_is_not_followed(after_a_run):
    project, task_id, path = after_a_run
    outside = project.parent / "elsewhere"
    shutil.copytree(path.parent, outside)  # the same transcript, reached through a symlink
    shutil.rmtree(path.parent)
    path.parent.symlink_to(outside, target_is_directory=True)
    refused(cli("transcript", task_id, cwd=project), path, "a symlink stands on its path")


@AFTER_A_RUN
def test_a_transcript_replaced_by_a_fifo_is_refused_not_waited_on(after_a_run):
    project, task_id, path = after_a_run
    path.unlink()
    os.mkfifo(path)  # cli() times out (a deadlock detector) if anything opens it to read
    refused(cli("transcript", task_id, cwd=project), path, "not a regular file")


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_the_last_thread_marker_is_read_only_as_a_regular_file(project, kind):
    state = project / ".deep_agent"
    state.mkdir()
    marker = state / "last_thread"
    if kind == "symlink":
        marker.symlink_to(project.parent / "secret.txt")
    else:
        os.mkfifo(marker)
    reason = "a symlink stands on its path" if kind == "symlink" else "not a regular file"
    refused(cli("tasks", cwd=project), marker, reason)


def test_a_run_never_writes_the_last_thread_through_a_symlink(project):
    state = project / ".deep_agent"
    state.mkdir()
    (state / "last_thread").symlink_to(project.parent / "secret.txt")
    cli("run", "Compare LangGraph and Pydantic.", "--thread", "t-data", cwd=project, env=SCRIPTED)
    assert (project.parent / "secret.txt").read_text() == SECRET + "\n"


@AFTER_A_RUN
def test_a_symlinked_checkpoint_database_is_refused(after_a_run):
    project, _, _ = after_a_run
    database = project / ".deep_agent" / "state.sqlite"
    moved = project.parent / "elsewhere.sqlite"
    database.rename(moved)
    database.symlink_to(moved)
    refused(cli("tasks", "t-data", cwd=project), database, "a symlink stands on its path")


@pytest.mark.parametrize(("journal", "command"), [("-wal", "tasks"), ("-wal", "run"), ("-shm", "tasks")])
@AFTER_A_RUN
def test_a_symlink_planted_as_the_databases_journal_is_refused_naming_it(after_a_run, command, journal):
    # Before: SQLite refused it too, but the error said "unable to open database file", naming nothing.
    project, _, _ = after_a_run
    planted = project / ".deep_agent" / f"state.sqlite{journal}"
    planted.unlink(missing_ok=True)
    planted.symlink_to(project.parent / "secret.txt")
    args = ["Compare LangGraph and Pydantic.", "--thread", "t-data"] if command == "run" else ["t-data"]
    refused(cli(command, *args, cwd=project, env=SCRIPTED), planted, "a symlink stands on its path")
    assert (project.parent / "secret.txt").read_text() == SECRET + "\n"


def test_a_symlinked_default_state_folder_is_refused(project):
    (project.parent / "elsewhere").mkdir()
    (project / ".deep_agent").symlink_to(project.parent / "elsewhere", target_is_directory=True)
    result = cli("tasks", "t-data", cwd=project)
    assert result.returncode == 2 and "is a symlink" in result.stderr, result.stderr


def test_reads_stay_inside_the_state_folder_and_are_bounded(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "big").write_bytes(b"x" * 101)
    with pytest.raises(StateFileError, match="lies outside the state folder"):
        read_state_file(state, tmp_path / "elsewhere")
    with pytest.raises(StateFileError, match="lies outside the state folder"):
        read_state_file(state, state / ".." / "state" / "big")
    with pytest.raises(StateFileError, match=r"big: holds more than 100 bytes"):
        read_state_file(state, "big", max_bytes=100)
    assert read_state_file(state, "big") == b"x" * 101
    assert MAX_STATE_FILE_BYTES >= 64 * 1024 * 1024  # a long transcript still reads


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_state_folder_the_cli_creates_stays_out_of_git_status(project):
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    ran(project)
    assert (project / ".deep_agent" / ".gitignore").read_text() == GITIGNORE
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=project,
                            capture_output=True, text=True, check=True).stdout
    assert status and ".deep_agent" not in status, status


def test_an_existing_state_folder_keeps_its_own_gitignore(tmp_path):
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / ".gitignore").write_text("mine\n")
    resolve_state_dir(kept)
    assert (kept / ".gitignore").read_text() == "mine\n"
    resolve_state_dir(tmp_path / "new" / "state")
    assert (tmp_path / "new" / "state" / ".gitignore").read_text() == GITIGNORE


def test_a_run_never_writes_transcripts_through_a_symlinked_sessions_folder(project):
    state = project / ".deep_agent"
    state.mkdir()
    outside = project.parent / "elsewhere"
    outside.mkdir()
    (state / "sessions").symlink_to(outside, target_is_directory=True)
    run = cli("run", "Compare LangGraph and Pydantic.", "--thread", "t-data", cwd=project, env=SCRIPTED)
    assert run.returncode == 1 and f"{state / 'sessions'}: is a symlink" in run.stderr, run.stderr
    assert list(outside.iterdir()) == []


def test_the_write_check_never_follows_a_symlink_planted_in_the_state_folder(tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    checkout = tmp_path / "checkout"
    state = checkout / ".deep_agent"
    state.mkdir(parents=True)
    for pid in range(os.getpid() - 5, os.getpid() + 5):  # whatever name the check would pick
        os.symlink(victim, state / f".write-check-{pid}")
    monkeypatch.chdir(checkout)
    assert resolve_state_dir(None) == state
    assert victim.read_text() == "precious\n"


def test_a_transcript_another_folder_wrote_is_read_as_that_state_folders_data(tmp_path):
    """A shared database's record names another folder's transcript: read under the same rule, symlinks refused."""
    from deep_agent.cli._inspect import state_holding
    from deep_agent.cli._store import StateFileError, state_file

    other = tmp_path / "project" / ".deep_agent"
    (other / "sessions" / "t" / "subagents").mkdir(parents=True)
    transcript = other / "sessions" / "t" / "subagents" / "agent-1.jsonl"
    transcript.write_text('{"type": "header"}\n', encoding="utf-8")
    here = tmp_path / "elsewhere" / ".deep_agent"
    assert state_holding(here, str(transcript)) == other
    with state_file(state_holding(here, str(transcript)), str(transcript)) as handle:
        assert handle.read() == b'{"type": "header"}\n'
    (other / "sessions" / "t" / "linked").symlink_to(other / "sessions" / "t" / "subagents")
    linked = other / "sessions" / "t" / "linked" / "agent-1.jsonl"
    with pytest.raises(StateFileError):
        state_file(state_holding(here, str(linked)), str(linked))


@pytest.mark.parametrize("planted", ["thread", "subagents", "file"])
def test_a_transcript_is_never_written_through_a_symlink_planted_in_the_sessions_folder(tmp_path, planted):
    """A cloned checkout's own ``.deep_agent/sessions`` may hold links: a transcript never follows one out."""
    from subagents._errors import InvalidArgument, TranscriptFileError
    from subagents._transcripts import jsonl_path, sink_chooser

    # The link leads to another folder inside the sessions folder (one leading out was refused by its path):
    # either way, no symlink below the sessions folder is followed.
    sessions = tmp_path / "sessions"
    outside = sessions / "other"
    outside.mkdir(parents=True)
    path = jsonl_path(sessions, "t1", "task1")
    if planted == "thread":
        (sessions / "t1").symlink_to(outside)
    elif planted == "subagents":
        (sessions / "t1").mkdir(parents=True)
        (sessions / "t1" / "subagents").symlink_to(outside)
    else:
        path.parent.mkdir(parents=True)
        path.symlink_to(outside / "agent-task1.jsonl")
    make = sink_chooser(sessions, None)
    with pytest.raises(TranscriptFileError):
        make(task_id="task1", agent_type="a", thread_id="t1", tool_call_id=None, namespace=None, store=None,
             has_checkpointer=False)
    assert list(outside.iterdir()) == []


def test_a_transcript_is_written_inside_a_plain_sessions_folder(tmp_path):
    from subagents._transcripts import read_jsonl, sink_chooser

    make = sink_chooser(tmp_path / "sessions", None)
    sink = make(task_id="task1", agent_type="a", thread_id="t1", tool_call_id=None, namespace=None, store=None,
                has_checkpointer=False)
    ref = sink.end([])
    header, _ = read_jsonl(ref.removeprefix("jsonl:"))
    assert header["agent_type"] == "a" if "agent_type" in header else header


@pytest.mark.parametrize("planted", ["the transcript", "its folder"])
def test_a_resumed_thread_reads_no_transcript_through_a_symlink(tmp_path, planted):
    # Finding a stopped task's transcript on resume (and after Ctrl-C) followed a transcript symlinked out of
    # the sessions folder and read it; a symlinked folder raised out of the resume instead of being skipped.
    from subagents._errors import InvalidArgument, TranscriptFileError
    from subagents._transcripts import header_for, jsonl_path, left_by_call, read_jsonl

    sessions, elsewhere = tmp_path / "sessions", tmp_path / "elsewhere"
    path = jsonl_path(sessions, "thr", "T1")
    path.parent.mkdir(parents=True)
    elsewhere.mkdir()
    header = header_for(task_id="T1", agent_type="w", thread_id="thr", tool_call_id="call1")
    (elsewhere / path.name).write_text(json.dumps(header) + "\n")
    if planted == "the transcript":
        path.symlink_to(elsewhere / path.name)
    else:
        path.parent.rmdir()
        path.parent.symlink_to(elsewhere, target_is_directory=True)
    assert left_by_call(sessions, "thr", {"call1"}, {}) == {}
    if planted == "the transcript":
        with pytest.raises(TranscriptFileError, match="a symlink"):
            read_jsonl(path)
    else:  # every path of the thread's transcripts is worked out through the sessions folder's own
        with pytest.raises(InvalidArgument, match="leaves its folder"):
            jsonl_path(sessions, "thr", "T1")
    path.unlink() if planted == "the transcript" else path.parent.unlink()
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(header) + "\n")  # the same file in place: found
    assert left_by_call(sessions, "thr", {"call1"}, {}) == {"call1": ("T1", f"jsonl:{path}")}
