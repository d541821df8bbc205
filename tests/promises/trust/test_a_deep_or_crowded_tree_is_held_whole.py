"""A deep or crowded workspace still runs its commands with every protected path held, or runs none.

Before: bubblewrap's command line held each bind's paths (a folder 300 deep binds the 300 on its way), and
each bind's source was a descriptor held at once: a tree deeper than a command line holds (a quarter of the
stack's limit: 2 MiB by default, 1,000 folders down), or with more binds than ``ulimit -n`` (a normal user's
1,024: a few hundred nested repositories), and bubblewrap could not start, so no command ran at all. Now its
options are read from a descriptor (``--args``) and room is made for the binds' descriptors; past what
bubblewrap takes (9,000 arguments), the command does not run, and the message says why.
"""

from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path

import pytest

from deep_agent.tools import _confined as confined
from deep_agent.tools._protected import Protected
from deep_agent.tools._sandbox import Sandbox, SandboxUnavailable


def _repository(folder: str) -> None:
    for part in ("objects", "refs"):
        os.makedirs(f"{folder}/.git/{part}")
    Path(folder, ".git", "HEAD").write_text("ref: refs/heads/main\n")
    Path(folder, ".git", "config").write_text("[core]\n")


def _tree(ws: Path, shape: str) -> Path:
    """``deep``: a repository 300 folders down; ``nested``: 100 repositories, each in the one before."""
    folder = str(ws)
    for _ in range(300 if shape == "deep" else 100):
        folder += "/d"
        os.mkdir(folder)
        if shape == "nested":
            _repository(folder)
    if shape == "deep":
        _repository(folder)
    return Path(folder)


def _small_machine() -> None:
    """This process's limits as a small machine's: a command line of 128 KiB (the least Linux gives), and
    descriptors 100 more than it holds."""
    resource.setrlimit(resource.RLIMIT_STACK, (512 * 1024, resource.getrlimit(resource.RLIMIT_STACK)[1]))
    highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 101, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def _run(ws: Path, command: str) -> str:
    sandbox = Sandbox.find()
    assert sandbox is not None
    try:
        with sandbox.running(ws, command, Protected.of(ws), cwd=ws, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as process:
            return process.communicate(timeout=300)[0].decode()
    except SandboxUnavailable as exc:
        return f"refused: {exc}"


@pytest.mark.parametrize("shape", ["deep", "nested"])
def test_a_deep_or_crowded_tree_runs_with_its_protected_paths_read_only(runner, shape):
    bottom = _tree(runner.ws, shape)
    runner.chown(runner.ws)

    def body() -> str:
        _small_machine()
        return _run(runner.ws, f"echo ran; echo planted >> {bottom}/.git/config")

    said = runner.in_a_process(body)
    assert said.startswith("ran\n") and "Read-only file system" in said, said
    assert (bottom / ".git" / "config").read_text() == "[core]\n"


def test_a_tree_past_what_bubblewrap_binds_runs_no_command(runner, monkeypatch):
    _tree(runner.ws, "deep")
    runner.chown(runner.ws)
    monkeypatch.setattr(confined, "MAX_ARGS", 200)  # 300 binds past it, as 3,000 are past bubblewrap's 9,000

    said = runner.in_a_process(lambda: _run(runner.ws, "touch ran"))
    assert said.startswith("refused:") and "than bubblewrap can bind" in said, said
    assert not (runner.ws / "ran").exists()


def test_a_workspace_held_whole_binds_nothing_writable_inside(runner):
    """A text that may run any file of the working tree (``for f in tools/*.sh; do sh "$f"; done``) holds it whole;
    a path inside it held as well was bound with each folder on its way writable. Before: ``tools/b.sh`` beside a
    held ``tools/a.sh`` could be written in a workspace held whole."""
    ws = runner.ws
    (ws / "tools").mkdir()
    (ws / "tools" / "a.sh").write_text("true\n")
    runner.chown(ws)
    out = runner.run("echo evil > tools/b.sh; echo done",
                     protected=Protected({ws: "held whole", ws / "tools" / "a.sh": "a script"}, ws))
    assert "done" in out and not (ws / "tools" / "b.sh").exists(), out
