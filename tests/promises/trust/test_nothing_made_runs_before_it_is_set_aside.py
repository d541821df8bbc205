"""What a sandboxed command makes at a protected path never runs on the host: it is set aside once the command
ends, however deep the workspace, or the command's answer says it could not be checked.

Before: the set-aside walk was ``os.walk``, which recurses on Python 3.11: a chain of 1,200 folders raised
``RecursionError``, every later ``Bash`` answer was that error, and the repositories the commands made stayed
(the user's next ``git status`` ran their config).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from deep_agent.tools import Workspace, builtin_tools
from deep_agent.tools._sandbox import SET_ASIDE

DEEP = 1200  # beyond Python's recursion limit


def test_a_repository_made_below_a_deep_chain_of_folders_is_set_aside(runner):
    deep = "/".join(["d"] * DEEP)
    try:
        out = runner.run(f"mkdir -p {deep} && git init -q {deep}/../r && git init -q r && echo made")
        assert "made" in out, out
        for repo in ("r", "/".join(["d"] * (DEEP - 1) + ["r"])):
            assert not (runner.ws / repo / ".git").exists(), repo
            assert (runner.ws / repo / f".git{SET_ASIDE}").is_dir(), repo
    finally:
        subprocess.run(["rm", "-rf", str(runner.ws / "d")], check=False)  # shutil.rmtree recurses as deep


def test_a_set_aside_that_fails_says_so_in_the_answer(tmp_path, monkeypatch):
    if shutil.which("bwrap") is None:
        pytest.skip("bwrap is not installed (Debian's bubblewrap package)")

    def broken(root: Path) -> object:
        raise RecursionError("maximum recursion depth exceeded")
        yield

    monkeypatch.setattr("deep_agent.tools._sandbox._walk_all", broken)
    (bash,) = [t for t in builtin_tools(Workspace(tmp_path)) if t.name == "Bash"]
    answer = bash.invoke({"command": "git init -q r && echo made", "timeout": 20_000})
    assert answer.startswith("made") and "could not be checked (RecursionError: " in answer, answer
    assert "may be left in place" in answer, answer
