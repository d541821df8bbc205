"""What cannot be protected is never left writable without a word.

Before: a placeholder for a missing protected path that could not be made (a full disk: ``ENOSPC``, no inodes
left) was skipped, so the path was the command's to make (``git init . && git config core.fsmonitor ...``),
and a ``.git`` at a protected path missing before the command counted as known, so it was never set aside: the
user's next ``git status`` ran its config. And the walk that sets new repositories aside held a descriptor a
level and skipped, without a word, what it could not open once they ran out (a deep tree, ``ulimit -n``).
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from deep_agent.tools._protected import Protected
from deep_agent.tools._sandbox import SET_ASIDE, Sandbox, SandboxUnavailable, set_aside_new_repositories

PLANT = "git init -q . && git config core.fsmonitor 'touch PWN' && echo planted"


def _repository(folder) -> None:
    for part in ("objects", "refs"):
        (folder / ".git" / part).mkdir(parents=True)
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")


def test_a_placeholder_that_cannot_be_made_is_no_command_run(runner):
    # Simulated in the process (a full tmpfs needs a mount): the placeholder's mkdir fails as on a full disk.
    def body() -> str:
        made = os.mkdir

        def full(path, mode=0o777, *, dir_fd=None):
            if dir_fd is not None:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
            made(path, mode)

        os.mkdir = full  # type: ignore[assignment]
        sandbox = Sandbox.find()
        assert sandbox is not None
        try:
            with sandbox.running(runner.ws, PLANT, Protected.of(runner.ws), cwd=runner.ws,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as process:
                return "ran: " + process.communicate(timeout=60)[0].decode()
        except SandboxUnavailable as exc:
            return f"refused: {exc}"

    said = runner.in_a_process(body)
    assert said.startswith("refused:"), said
    assert str(runner.ws / ".git") in said and os.strerror(errno.ENOSPC) in said and "did not run" in said
    assert not (runner.ws / ".git").exists()


def test_a_full_disk_is_no_command_run(runner):
    # The disk itself full, where the tests may mount one (root): a tmpfs of 400 inodes, all used.
    if runner.who != "root" or shutil.which("mount") is None:
        pytest.skip("mounting a small file system needs root")
    ws = Path(tempfile.mkdtemp(prefix="sandbox-full-"))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m,nr_inodes=400", "tmpfs", str(ws)],
                      capture_output=True, check=False).returncode:
        pytest.skip("no tmpfs could be mounted here")
    try:
        with pytest.raises(OSError):
            for n in range(1000):
                (ws / f"f{n}").touch()
        sandbox = Sandbox.find()
        assert sandbox is not None
        with pytest.raises(SandboxUnavailable, match=os.strerror(errno.ENOSPC)) as refused, sandbox.running(
                ws, f"rm -f f*; {PLANT}", Protected.of(ws), cwd=ws, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as process:
            process.communicate(timeout=60)
        assert str(ws / ".git") in str(refused.value)
        assert not (ws / ".git").exists() and (ws / "f0").exists()  # nothing ran
    finally:
        subprocess.run(["umount", "-l", str(ws)], check=False)
        os.rmdir(ws)


def test_a_repository_at_a_protected_path_missing_before_the_command_is_set_aside(runner):
    # What a command could make where its placeholder was missing: the host's hands stand in for it.
    def body() -> str:
        sandbox, moved = Sandbox.find(), []
        assert sandbox is not None
        with sandbox.holding(runner.ws, Protected.of(runner.ws), moved):
            os.rmdir(runner.ws / ".git")  # the placeholder
            _repository(runner.ws)
        return repr(moved)

    assert repr(runner.ws / f".git{SET_ASIDE}") in runner.in_a_process(body)
    assert not (runner.ws / ".git").exists()


def _deep(ws, levels: int):
    """``levels`` folders down, four at each level, one going on: names of their own at each level, so the one
    going on is listed at any place (the walk has siblings of it left to walk at most levels)."""
    folder = ws
    for level in range(levels):
        for name in "abc":
            (folder / f"{name}{level}").mkdir()
        folder = folder / f"n{level}"
        folder.mkdir()
    return folder


def _limited(extra: int) -> None:
    """Descriptors limited to ``extra`` more than this process holds (the highest it holds counts)."""
    highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1 + extra, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def test_a_deep_tree_never_runs_the_walk_out_of_descriptors(runner):
    def body() -> str:
        protected = Protected.of(runner.ws)
        protected.paths  # noqa: B018 - the run's start
        _repository(_deep(runner.ws, 300))
        _repository(runner.ws / "evil")
        _limited(100)
        return repr(sorted(set_aside_new_repositories(runner.ws, protected)))

    said = runner.in_a_process(body)
    for folder in (runner.ws / "evil", runner.ws.joinpath(*(f"n{level}" for level in range(300)))):
        assert not (folder / ".git").exists(), said
        assert (folder / f".git{SET_ASIDE}").is_dir()


def test_a_walk_out_of_descriptors_raises_rather_than_skips(runner):
    def body() -> str:
        protected = Protected.of(runner.ws)
        protected.paths  # noqa: B018
        _repository(runner.ws / "sub")
        _limited(50)
        held = []
        try:
            while True:
                held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            os.close(held[-1])  # the workspace's, and none to list it
        try:
            return f"returned {set_aside_new_repositories(runner.ws, protected)!r}"
        except OSError as exc:
            return f"raised {errno.errorcode[exc.errno or 0]}"

    assert runner.in_a_process(body) == "raised EMFILE"
    assert (runner.ws / "sub" / ".git").is_dir()
