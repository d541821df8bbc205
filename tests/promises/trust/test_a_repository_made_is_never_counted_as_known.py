"""A git repository a sandboxed command made is set aside, whatever this process imported meanwhile.

Before: with a folder of the workspace on the import path, every new module this process imported made the
protected set be worked out again, git walk included: a ``.git`` a command had made was then found, counted as
known, and never set aside; the user's next ``git status`` there ran its ``core.fsmonitor``.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

from deep_agent.tools._protected import Protected
from deep_agent.tools._sandbox import SET_ASIDE, Sandbox, set_aside_new_repositories


def test_a_repository_made_before_an_import_is_still_set_aside(runner):
    def body() -> str:
        sys.path.insert(0, str(runner.ws))
        protected = Protected.of(runner.ws)
        protected.paths  # noqa: B018 - the run's start
        for part in ("objects", "refs"):
            (runner.ws / "sub" / ".git" / part).mkdir(parents=True)
        (runner.ws / "sub" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        (runner.ws / "fresh_module.py").write_text("X = 1\n")
        importlib.import_module("fresh_module")
        return repr(set_aside_new_repositories(runner.ws, protected))

    assert repr(runner.ws / "sub" / f".git{SET_ASIDE}") in runner.in_a_process(body)
    assert not (runner.ws / "sub" / ".git").exists()


def test_a_repository_a_bash_command_made_is_set_aside_whatever_was_imported_while_it_ran(runner):
    def body() -> str:
        sys.path.insert(0, str(runner.ws))
        protected, moved = Protected.of(runner.ws), []
        sandbox = Sandbox.find()
        assert sandbox is not None
        with sandbox.running(runner.ws, "git init -q sub && echo 'X = 1' > fresh_module.py && echo made", protected,
                             set_aside=moved, cwd=runner.ws, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT) as process:
            out = process.communicate(timeout=60)[0].decode()
            assert "made" in out, out
            importlib.import_module("fresh_module")
        return repr(moved)

    assert repr(runner.ws / "sub" / f".git{SET_ASIDE}") in runner.in_a_process(body)
    assert not (runner.ws / "sub" / ".git").exists()
