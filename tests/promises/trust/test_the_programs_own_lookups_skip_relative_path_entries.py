"""The program's own lookups (bwrap, pasta, bash, git) never find a program of the folder it runs in: a relative
``PATH`` entry (``bin``, ``node_modules/.bin``, ``.``) is dropped when it starts.

Before, with ``bin`` on ``PATH``, a checkout's ``bin/bwrap`` was the sandbox: it ran the agent's command on the
host, unconfined."""

from __future__ import annotations

import os
import shutil

import pytest
from helpers.cli import SCRIPTS, cli, make_project


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
