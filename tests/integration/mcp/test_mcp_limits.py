"""An MCP call against the task's limits: a hung server is the task's timeout, and never outlives the process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers.graphs import records, user
from deep_agent import create_deep_agent
from subagents._errors import TaskTimeout
from subagents._metering import TaskMeter
from subagents.definitions._mcp import McpServerError, McpTool
from helpers import TESTS
from helpers.background import returns
from helpers.mcp_tasks import _napping, alive, pids
from subagents._settings import DelegationSettings

pytestmark = pytest.mark.server


def test_a_call_cut_short_by_the_tasks_timeout_is_recorded_as_a_timeout(run):
    spec, model = _napping({"timeout_s": 3})
    # The nap lasts an hour: a run that waited for it never ends, and the hang guard (no budget) catches that.
    out = returns(lambda: run(create_deep_agent(model, subagents=[spec], settings=DelegationSettings.of(
        general_purpose=False)), user("go")))
    (record,) = records(out)
    assert (record["status"], record["stop_reason"]) == ("error", "timeout"), record["error"]
    assert "timed out after 3s" in record["error"]


def test_a_task_whose_server_is_still_listing_its_tools_at_its_timeout_is_recorded_as_a_timeout(run):
    # A server that never lists (or a machine too busy to start one within timeout_s): the listing ran on the
    # task's own time, so its end is the task's timeout, not a server's error.
    spec, model = _napping({"timeout_s": 1}, {"mode": "hang"})
    out = run(create_deep_agent(model, subagents=[spec], settings=DelegationSettings.of(general_purpose=False)),
              user("go"))
    (record,) = records(out)
    assert (record["status"], record["stop_reason"]) == ("error", "timeout"), record["error"]
    assert "timed out after 1s" in record["error"]


def test_a_call_cut_short_by_the_servers_own_timeout_is_that_tools_failure(run):
    spec, model = _napping({"timeout_s": 60}, {"timeout": 1.5})
    out = run(create_deep_agent(model, subagents=[spec], settings=DelegationSettings.of(general_purpose=False)), user("go"))
    (record,) = records(out)
    assert record["stop_reason"] == "tool_error"
    assert "MCP server 'slow' did not answer a call of 'nap' within 1.5s" in record["error"]


SCRIPT = """
import sys
sys.path[:0] = [{tests!r}, {root!r}]
from deep_agent import create_deep_agent
from helpers.mcp_tasks import _napping
from subagents import DelegationSettings
spec, model = _napping({{"timeout_s": 10}}, {{"env": {{"MCP_PID_FILE": {pid_file!r}}}}})
out = create_deep_agent(model, subagents=[spec], settings=DelegationSettings.of(general_purpose=False)).invoke(
    {{"messages": [{{"role": "user", "content": "go"}}]}})
print([r["stop_reason"] for r in out["subagent_tasks"].values()])
"""


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie waits for whoever adopted it to reap it)."""
    try:
        return alive(pid) and "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return alive(pid)


def test_a_hung_stdio_server_is_ended_when_the_process_exits_right_after_the_run(tmp_path):
    # The task's sessions close as its run ends, but the server leaves only after the MCP client's
    # shutdown (seconds, for a server that ignores its closed stdin): exiting at once must still end it.
    # The task's 10 s timeout ends the 120 s nap; with 2 s, starting the server on a loaded machine
    # took the whole budget and the task ended in an error before the nap began.
    pid_file = tmp_path / "pids"
    tests = TESTS
    script = tmp_path / "run_and_exit.py"
    script.write_text(textwrap.dedent(SCRIPT.format(tests=str(tests), root=str(tests.parent),
                                                    pid_file=str(pid_file))))
    out, err = tmp_path / "out", tmp_path / "err"  # files, not pipes: a server left behind would hold a pipe
    started_at = time.monotonic()
    with out.open("w") as stdout, err.open("w") as stderr:
        code = subprocess.run([sys.executable, str(script)], stdout=stdout, stderr=stderr, timeout=120,
                              env={**os.environ, "PYTHONPATH": ""}).returncode
    took = time.monotonic() - started_at
    assert code == 0, err.read_text()[-2000:]
    assert "['timeout']" in out.read_text()
    started = pids(pid_file)  # the listing's server, then the task's
    assert len(started) == 2
    deadline = time.monotonic() + 5
    while any(map(_running, started)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in started if _running(pid)]
    for pid in left:
        os.kill(pid, 9)
    assert not left, f"an MCP server outlived the process that started it (which ran {took:.1f}s)"


class _Expired:
    """A toolset whose every call fails as a server that did not answer in time."""

    def sessions_for(self, run_manager, server):
        return self, 0.01

    def call_tool(self, *args):
        return None

    def wait(self, coro, timeout):
        raise McpServerError("slow", "did not answer a call of 'nap' within 0.01s")

    async def await_(self, coro):
        self.wait(coro, 0)


@pytest.mark.parametrize("deadline_passed", [True, False])
def test_an_mcp_call_past_the_tasks_deadline_raises_the_meters_own_timeout(deadline_passed):
    meter = TaskMeter(deadline=time.monotonic() + (-1 if deadline_passed else 60))
    tool = McpTool(name="mcp__slow__nap", description="nap", args_schema={"type": "object", "properties": {}},
                   server="slow", remote_name="nap", toolset=_Expired())
    manager = SimpleNamespace(handlers=[meter], inheritable_handlers=[])
    for call in (lambda: tool._run(run_manager=manager), lambda: asyncio.run(tool._arun(run_manager=manager))):
        with pytest.raises(TaskTimeout if deadline_passed else McpServerError) as raised:
            call()
    if deadline_passed:  # the runner's own timeout of the same words is not taken for the tool's error
        meter.on_tool_error(raised.value)
        assert meter.origin_of(TaskTimeout("timed out")) is None
