"""MCP servers per subagent: real FastMCP servers over stdio and streamable HTTP."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from helpers.agent_files import DETAIL, write
from helpers.background import returns
from helpers.graphs import echo, records, tool_messages, user
from helpers.mcp_tasks import SERVERS, alive, delegate, pids, report, stdio

from bench.dev_server import free_port
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from deep_agent.cli._app import main as cli
from subagents import _runner as runner_module
from subagents._settings import DelegationSettings
from subagents.definitions._mcp import TASK_ID_METADATA_KEY

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(SERVERS), "http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError("the MCP HTTP test server did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_metadata_key_is_the_runners():
    assert TASK_ID_METADATA_KEY == runner_module.TASK_ID_METADATA_KEY


def test_a_child_calls_tools_of_a_stdio_and_an_http_server_and_the_parent_never_sees_them(
    tmp_path, http_url, run
):
    write(tmp_path / "agents" / "calc.md", (
        "---\nname: calc\ndescription: computes\ntools: [echo, 'mcp__local__*', mcp__remote]\n"
        "disallowedTools: [mcp__local__die]\n"
        f"mcp_config:\n  local: {{command: {sys.executable!r}, args: [{str(SERVERS)!r}, stdio]}}\n"
        f"  remote: {{url: {http_url!r}}}\n---\nYou compute.\n"
    ))
    model = delegate(("add numbers", "calc"), child_rules=[("add numbers", [
        {"tool_calls": [tool_call("mcp__local__add", a=2, b=3), tool_call("mcp__remote__add", a=40, b=2),
                        tool_call("mcp__local__task", description="x")]},
        report,
    ])])
    agent = create_deep_agent(model, [echo], settings=DelegationSettings.of(
        agents_dirs=[tmp_path / "agents"], general_purpose=False,
    ))
    out = run(agent, user("go"))
    assert tool_messages(out)[0].content.startswith("Results: 5 | 42 | server task: x")
    parent_tools, child_tools = model.calls[0]["tools"], model.calls[1]["tools"]
    assert sorted(parent_tools) == ["echo", "task"]
    assert child_tools[0] == "echo" and "mcp__local__die" not in child_tools
    assert {"mcp__local__add", "mcp__local__task", "mcp__remote__add", "mcp__remote__die"} <= set(child_tools)
    assert out["messages"][-1].content == "parent carried on"


def test_one_task_reuses_its_connection_and_parallel_tasks_each_own_one_closed_at_the_end(tmp_path, run):
    pid_file = tmp_path / "pids"
    spec = {"name": "who", "description": "asks", "mcp_config": {"srv": stdio(env={"MCP_PID_FILE": str(pid_file)})}}
    ask = [{"tool_calls": [tool_call("mcp__srv__whoami")]}, {"tool_calls": [tool_call("mcp__srv__whoami")]}, report]
    model = delegate(("first", "who"), ("second", "who"), child_rules=[("first", ask), ("second", ask)])
    out = run(create_deep_agent(model, subagents=[spec], settings=DelegationSettings.of(general_purpose=False)), user("go"))
    first, second = (re.findall(r"pid \d+", m.content) for m in tool_messages(out))
    assert len(first) == len(second) == 2
    assert first[0] == first[1] and second[0] == second[1] and first[0] != second[0]
    started = pids(pid_file)
    assert len(started) == 3  # one listing when the child was built, one per task
    deadline = time.monotonic() + 10
    while any(alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in started)


def test_a_server_that_cannot_start_fails_only_its_task_naming_the_server(run):
    specs = [{"name": "broken", "description": "b", "mcp_config": {"flaky": stdio("crash")}},
             {"name": "fine", "description": "f", "tools": ["echo"]}]
    model = delegate(("use broken", "broken"), ("use fine", "fine"),
                     child_rules=[("use fine", ["fine answer." + DETAIL])])
    out = run(create_deep_agent(model, [echo], subagents=specs, settings=DelegationSettings.of(
        general_purpose=False,
    )), user("go"))
    by_agent = {r["agent_type"]: r for r in records(out)}
    assert by_agent["fine"]["status"] == "completed"
    assert by_agent["broken"]["status"] == "error"
    assert "MCP server 'flaky' failed to start" in by_agent["broken"]["error"]
    assert out["messages"][-1].content == "parent carried on"


def test_a_server_that_dies_mid_task_fails_that_task_naming_the_server(run):
    spec = {"name": "d", "description": "d", "mcp_config": {"srv": stdio()}}
    die = [{"tool_calls": [tool_call("mcp__srv__die")]}, report]
    model = delegate(("die now", "d"), child_rules=[("die now", die)])
    out = run(create_deep_agent(model, subagents=[spec], settings=DelegationSettings.of(general_purpose=False)), user("go"))
    (record,) = records(out)
    assert record["status"] == "error" and "MCP server 'srv'" in record["error"]


@pytest.mark.parametrize("where", ["listing", "call", "deadline"])
def test_a_hung_server_fails_its_task_in_bounded_time_and_siblings_go_on(run, where):
    spec = {"name": "h", "description": "h", "mcp_config": {"slow": stdio("hang")}, "timeout_s": 1.5}
    if where == "call":  # the server's own bound on one call
        spec = {"name": "h", "description": "h", "mcp_config": {"slow": stdio(timeout=2)}}
    elif where == "deadline":  # the task's timeout_s bounds the call (and the server's start-up)
        spec = {"name": "h", "description": "h", "mcp_config": {"slow": stdio()}, "timeout_s": 8}
    model = delegate(("wait", "h"), ("other", "general-purpose"), child_rules=[
        ("wait", [{"tool_calls": [tool_call("mcp__slow__nap", seconds=3600)]}, report]),
        ("other", ["sibling answer." + DETAIL]),
    ])
    # The nap lasts an hour: a run that waited for it never ends, and the hang guard (no budget) catches that.
    out = returns(lambda: run(create_deep_agent(model, subagents=[spec]), user("go")))
    by_agent = {r["agent_type"]: r for r in records(out)}
    assert by_agent["general-purpose"]["status"] == "completed"
    assert by_agent["h"]["status"] == "error"
    expected = {"listing": "MCP server 'slow' did not list its tools within 1.5s",
                "call": "MCP server 'slow' did not answer a call of 'nap' within 2s",
                "deadline": "MCP server 'slow' did not answer a call of 'nap' within "}[where]
    error = by_agent["h"]["error"]
    if where == "deadline":  # what was left of the 8 s once the server had started
        left = re.search(re.escape(expected) + r"([0-9.]+)s", error)
        # With timeout_s the runner's own timer may fire first; either way the task fails in time.
        assert (left is not None and float(left.group(1)) < 8) or "8s" in error, error
    else:
        assert expected in error, error


def test_allow_lists_without_mcp_entries_give_no_mcp_tools(run):
    spec = {"name": "plain", "description": "p", "tools": ["echo"], "mcp_config": {"srv": stdio()}}
    model = delegate(("look", "plain"), child_rules=[("look", ["nothing." + DETAIL])])
    run(create_deep_agent(model, [echo], subagents=[spec], settings=DelegationSettings.of(general_purpose=False)), user("go"))
    assert model.calls[1]["tools"] == ["echo"]


def test_a_named_server_resolves_through_the_callers_servers(run):
    spec = {"name": "n", "description": "n", "mcp_config": ["calc"]}
    model = delegate(("sum", "n"), child_rules=[("sum", [{"tool_calls": [tool_call("mcp__calc__add", a=1, b=1)]},
                                                         report])])
    agent = create_deep_agent(model, subagents=[spec],
                              settings=DelegationSettings.of(mcp_servers={"calc": stdio()}, general_purpose=False))
    assert tool_messages(run(agent, user("go")))[0].content.startswith("Results: 2")
    undefined = delegate(("sum", "n"), child_rules=[])
    out = run(create_deep_agent(undefined, subagents=[spec], settings=DelegationSettings.of(general_purpose=False)), user("go"))
    assert "MCP server 'calc' is named but not defined" in records(out)[0]["error"]


def test_cli_validate_checks_commands_and_urls_and_list_shows_servers(tmp_path, capsys):
    write(tmp_path / "ok.md", f"---\nname: ok\ndescription: d\nmcp_config:\n  s: {{command: {sys.executable!r}}}\n"
                              "  r: {url: 'http://127.0.0.1:1/mcp'}\n---\nB\n")
    write(tmp_path / "cmd.md",
          "---\nname: cmd\ndescription: d\nmcp_config: {s: {command: no-such-mcp-server}}\n---\nB\n")
    write(tmp_path / "url.md", "---\nname: url\ndescription: d\nmcp_config: {s: {url: 'not a url'}}\n---\nB\n")
    assert cli(["agents", "validate", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "command 'no-such-mcp-server' not found on PATH" in out
    assert "url 'not a url' is not an http(s) or ws(s) URL" in out
    assert "3 agent file(s): 1 valid, 2 problem(s)" in out
    assert cli(["agents", "list", str(tmp_path / "ok.md").rsplit("/", 1)[0]]) == 1
    assert "mcp_servers: s (stdio), r (http)" in capsys.readouterr().out


def test_background_tasks_each_own_their_connection(run, tmp_path):
    from helpers.background import start, started_ids, wait_for
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from middleware import BackgroundSubagentMiddleware
    from subagents.background._local import known_task

    pid_file = tmp_path / "pids"
    spec = {"name": "who", "description": "asks", "mcp_config": {"srv": stdio(env={"MCP_PID_FILE": str(pid_file)})}}
    ask = [{"tool_calls": [tool_call("mcp__srv__whoami")]}, report]
    model = ScriptedChatModel(rules=[("job a", ask), ("job b", ask),
                                     ("PARENT", [start(("job a", "who"), ("job b", "who")), "started"])],
                              default="ok")
    agent = create_agent(model, [], middleware=[BackgroundSubagentMiddleware([spec])], checkpointer=InMemorySaver())
    out = run(agent, user("PARENT go"), {"configurable": {"thread_id": f"mcp-{time.monotonic_ns()}"}})
    ids = started_ids(out["messages"])
    wait_for(lambda: all(known_task(i).fields["status"] in ("completed", "error") for i in ids), timeout=90)
    results = [known_task(i).fields.get("result") or "" for i in ids]
    found = [re.findall(r"pid \d+", r) for r in results]
    assert all(len(f) == 1 for f in found) and found[0] != found[1], results
    assert len(pids(pid_file)) == 3


def test_a_headers_environment_names_are_read_from_the_environment(monkeypatch):
    """``headers: {Authorization: "Bearer ${DOCS_TOKEN}"}`` (docs/agent-files.md) sends the variable's value, as
    the client does for a stdio server's ``env``; a name that is not set is sent as written."""
    import asyncio
    import http.server
    import threading

    from langchain_mcp_adapters.sessions import create_session

    from subagents.definitions._mcp import connection_for

    seen: list[dict[str, str]] = []

    class Capture(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
            seen.append(dict(self.headers))
            self.send_error(404)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("DOCS_TOKEN", "s3cret")
    config = {"url": f"http://127.0.0.1:{server.server_address[1]}/mcp",
              "headers": {"Authorization": "Bearer ${DOCS_TOKEN}", "X-Other": "${NOT_SET_ANYWHERE}"}}

    async def connect() -> None:
        async with create_session(connection_for("docs", config)) as session:
            await session.initialize()

    try:
        with pytest.raises(BaseException):  # the capture answers 404: only the request's headers matter
            asyncio.run(asyncio.wait_for(connect(), 20))
    finally:
        server.shutdown()
    assert seen and seen[0]["Authorization"] == "Bearer s3cret"
    assert seen[0]["X-Other"] == "${NOT_SET_ANYWHERE}"
