"""Ctrl-C always stops a ``deep-agent run``, whatever step it is at, and every task it cut short is ``cancelled``.

The run is the command line's own, on a scripted root that delegates one
survey (its child reads a file), then two in parallel, then answers. Each
case presses a real Ctrl-C at one step (:mod:`helpers.ctrl_c_points`: a callback
raises ``SIGINT`` as the run reaches it; no sleep decides when), each run a
process of its own, forked from one that imported the command line once. Before the
one handler, a Ctrl-C pressed as the tool node started its children, before
their watch was installed, was lost: the run went on to its answer and
exited 0.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import TESTS
from helpers.cli import SCRIPTS, make_project, terminal_env
from helpers.ctrl_c_points import POINTS

TASK_ROW = re.compile(r"│ (\w{8}) +│ editor +│ task +│ (\w+) +│")


@pytest.fixture(scope="module")
def pressed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every point pressed, each in a project of its own: point -> the folder of its project and its output."""
    folders = {point: tmp_path_factory.mktemp("ctrl-c") for point in POINTS}
    cases = [str(arg) for point, folder in folders.items() for arg in (point, make_project(folder / "project"))]
    env = {**terminal_env(folders[next(iter(POINTS))] / "project"),
           "PYTHONPATH": os.pathsep.join([SCRIPTS["PYTHONPATH"], str(TESTS)])}
    subprocess.run([sys.executable, "-m", "helpers.ctrl_c_points", *cases], env=env, check=True,
                   timeout=300 * len(POINTS))  # a deadlock's bound (each run has its own), not a speed
    return folders


def press_ctrl_c_at(point: str, pressed: dict[str, Path]) -> tuple[dict[str, Any], str, str]:
    stdout, stderr = ((pressed[point] / name).read_text() for name in ("stdout", "stderr"))
    found = re.search(r"^RESULT (.*)$", stdout, re.MULTILINE)
    assert found, stdout[-3000:] + stderr[-3000:]
    return json.loads(found.group(1)), stdout, stderr


@pytest.mark.xdist_group("ctrl-c")  # the points share one start: on one worker
@pytest.mark.parametrize("point", list(POINTS))
def test_ctrl_c_at_any_step_ends_the_run_as_interrupted_with_every_open_task_cancelled(pressed, point):
    result, output, errors = press_ctrl_c_at(point, pressed)
    run, _, listing = output.partition("RESULT ")
    assert result["pressed"], output[-3000:]
    assert result["status"] == 130 and errors.startswith("deep-agent: interrupted"), output[-3000:] + errors[-3000:]
    # Nothing went on: no model call or tool that started after the press finished, and no answer came.
    assert result["ended_after"] == 0, result
    assert "All three surveys are done." not in run
    # The last frame of the live tree says what the records say: no task is left running.
    last_frame = run[run.rindex("deep agent  "):]
    assert last_frame.startswith("deep agent  interrupted"), last_frame
    assert not re.search(r"editor +\w{8} +(running|pending|waiting_for_approval)", last_frame), last_frame
    # Every task the run started has a record: finished ones as they ended, the others cancelled.
    statuses = [status for _, status in TASK_ROW.findall(listing)]
    assert set(statuses) <= {"completed", "cancelled"}, listing
    shown = re.findall(r"editor +\w{8} +(\w+)", last_frame)
    assert sorted(statuses) == sorted(shown), (listing, last_frame)
