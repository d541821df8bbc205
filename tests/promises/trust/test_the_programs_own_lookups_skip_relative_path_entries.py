"""The program's own lookups (bwrap, pasta, bash, git) never find a program of the folder it runs in: a relative
``PATH`` entry (``bin``, ``node_modules/.bin``, ``.``) is dropped when it starts.

Before, with ``bin`` on ``PATH``, a checkout's ``bin/bwrap`` was the sandbox: it ran the agent's command on the
host, unconfined. A library user, whose PATH is as it was, gets the same from ``Sandbox.find()``: it looked up
``bin/bwrap`` too."""

from __future__ import annotations

import os
import shutil

import pytest
from helpers.cli import SCRIPTS, cli, make_project

from deep_agent.tools._sandbox import Sandbox


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_a_checkouts_bwrap_on_a_relative_path_entry_is_never_the_sandbox(tmp_path):
    project = make_project(tmp_path / "p")
    marker = tmp_path / "planted-bwrap-ran"
    planted = project / "bin" / "bwrap"
    planted.parent.mkdir()
    planted.write_text(f"#!/bin/sh\ntouch {marker}\nexec {shutil.which('bwrap')} \"$@\"\n")
    planted.chmod(0o755)
    env = {**SCRIPTS, "PATH": os.pathsep.join(["bin", os.environ.get("PATH", os.defpath)])}
    result = cli("run", "Run it", "--model", "scripted:cli_scripts:padded_bash", "--yes", cwd=project, env=env)
    assert result.returncode == 0, result.stderr
    assert (project / "hidden-at-the-end").exists(), result.stdout  # the command ran, confined
    assert not marker.exists(), "the checkout's bin/bwrap ran on the host"


@pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("pasta") is None, reason="needs bwrap and pasta")
def test_a_library_users_sandbox_finds_no_program_on_a_relative_path_entry(tmp_path, monkeypatch):
    # A library user builds the sandbox with PATH as it is: Sandbox.find() drops the relative entries itself.
    for name in ("bwrap", "pasta", "bash"):
        planted = tmp_path / "bin" / name
        planted.parent.mkdir(exist_ok=True)
        planted.write_text("#!/bin/sh\nexit 0\n")
        planted.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", os.pathsep.join(["bin", os.environ.get("PATH", os.defpath)]))
    sandbox = Sandbox.find(network=True)
    assert sandbox is not None and os.path.isabs(sandbox.bwrap) and os.path.isabs(sandbox.pasta or ""), sandbox
    assert "bin" not in sandbox.environment()["PATH"].split(os.pathsep)  # bubblewrap's own look-up of bash
