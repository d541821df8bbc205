"""A folder a command swaps for a symlink, while the program works on the workspace, leads it nowhere outside.

Before: the set-aside walk and bubblewrap's binds went by path. A command running beside swapped a folder it had
listed for a symlink to a repository outside the workspace, and the walk renamed that repository's ``.git``; a
folder on the way to a protected path swapped for a symlink just before bubblewrap mounted it had the symlink's
target (a home folder) bound writable in the sandbox.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from deep_agent.tools._confined import SpawnFailed, spawned
from deep_agent.tools._protected import Protected
from deep_agent.tools._sandbox import Sandbox, _folder_of, set_aside_new_repositories


def _outside(runner) -> Path:
    """A repository outside the workspace, owned by the runner's user."""
    victim = Path(tempfile.mkdtemp(prefix="sandbox-victim-"))
    subprocess.run(["git", "init", "-q", str(victim)], check=True)
    runner.chown(victim)
    return victim


def test_a_folder_swapped_for_a_symlink_while_the_walk_runs_is_not_followed(runner):
    victim = _outside(runner)
    (runner.ws / "a").mkdir()
    runner.chown(runner.ws / "a")

    def body() -> str:
        protected = Protected.of(runner.ws)
        protected.paths  # noqa: B018 - the run's start
        listed = os.scandir

        def scandir(where: object) -> object:  # the workspace listed, then "a" swapped, as a parallel command would
            entries = list(listed(where))  # type: ignore[call-overload]
            named = os.readlink(f"/proc/self/fd/{where}") if isinstance(where, int) else str(where)
            if named == str(runner.ws) and (runner.ws / "a").is_dir():
                (runner.ws / "a").rmdir()
                (runner.ws / "a").symlink_to(victim)
            return _Listing(entries)

        os.scandir = scandir  # type: ignore[assignment]  # this forked process only
        return repr(set_aside_new_repositories(runner.ws, protected))

    try:
        said = runner.in_a_process(body)
        assert (victim / ".git" / "HEAD").is_file() and sorted(os.listdir(victim)) == [".git"], said
        assert (runner.ws / "a").is_symlink(), said
    finally:
        shutil.rmtree(victim, ignore_errors=True)


class _Listing(list):  # type: ignore[type-arg]
    def __enter__(self) -> _Listing:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def test_a_bind_source_swapped_for_a_symlink_is_not_followed(runner):
    home = Path(tempfile.mkdtemp(prefix="sandbox-home-"))
    (home / ".git").mkdir()  # a home kept in git: what the protected path names is there too
    runner.chown(home)
    (runner.ws / "a" / ".git").mkdir(parents=True)  # "a": a folder bound writable on the way to a protected path
    runner.chown(runner.ws / "a")

    def body() -> str:
        sandbox = Sandbox.find()
        assert sandbox is not None
        with sandbox.holding(runner.ws) as protected:
            argv = sandbox.argv(runner.ws, "echo planted > a/planted; echo ran", protected)
            at = argv.index(str(runner.ws / "a"))
            assert argv[at - 1:at + 2] == ["--bind", str(runner.ws / "a"), str(runner.ws / "a")], argv
            (runner.ws / "a").rename(runner.ws / "a-real")
            (runner.ws / "a").symlink_to(home)  # just before bubblewrap mounts it
            try:
                with spawned(lambda sync, seccomp: argv, None, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT) as process:
                    return process.communicate(timeout=60)[0].decode()
            except SpawnFailed as exc:
                return f"refused: {exc}"

    try:
        said = runner.in_a_process(body)
        assert not (home / "planted").exists() and os.listdir(home) == [".git"], said
        assert said.startswith("refused: a path the sandbox binds is now a symlink"), said
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_a_symlink_on_the_way_to_a_placeholder_gives_no_folder_to_make_it_in(tmp_path):
    """A placeholder is made (and removed) in the folder its path names, or nowhere: a folder on its way swapped for
    a symlink gave the last folder reached (the workspace), where a placeholder ``x`` would be made instead."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to("real")
    with _folder_of(tmp_path, tmp_path / "link" / "x") as parent:
        assert parent is None
    with _folder_of(tmp_path, tmp_path / "real" / "x") as parent:
        assert parent is not None and os.path.samestat(os.fstat(parent), os.stat(tmp_path / "real"))
