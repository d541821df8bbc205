"""Remote background tasks when servers misbehave: leaked keys, hung, dead and restarted servers.

Every test here is bounded in time: the servers that misbehave are loopback
sockets of the test's own (a recorder, a proxy told to hang or drop) or a
real ``langgraph dev`` the test kills and restarts.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from helpers.background import NOTICE, as_json, last_tool_result, ledger, notices, on_task, returns, start, wait_for
from helpers.graphs import Runner, user
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.fault_servers import FaultProxy, RecordingServer
from middleware import BackgroundSubagentMiddleware
from subagents import BackgroundRuntime, SpecError, wait_for_background
from subagents.background._remote import RemoteStartError, RemoteSubagentSpec, RemoteTaskRunner, task_thread_id
from subagents.background._remote import RemoteClientPool, shared_client_pool
from subagents.background._remote import ServerHealth
from subagents._spec import RemoteConfigError
from subagents._settings import DelegationSettings

_RT: BackgroundRuntime
"""One runtime for the direct runner calls of this module, opened and closed by the fixture below."""


@pytest.fixture(scope="module", autouse=True)
def _runtime() -> Any:
    # Under xdist a worker may run this module's tests in several stretches, tearing the
    # module fixture down between them: each stretch opens a runtime of its own.
    global _RT
    _RT = BackgroundRuntime()
    yield
    _RT.close()

ENV_KEYS = ("LANGSMITH_API_KEY", "LANGGRAPH_API_KEY", "LANGCHAIN_API_KEY")


def worker(url: str, **extra: Any) -> dict[str, Any]:
    return {"name": "remote-worker", "description": "Works on a LangGraph Server.",
            "graph_id": "scripted_worker", "url": url, **extra}


def quick_backoff(middleware: BackgroundSubagentMiddleware) -> BackgroundSubagentMiddleware:
    """Its own clients, and a circuit that retries after 0.3 s (up to 1 s) instead of minutes."""
    middleware.tasks.remote.client_pool = RemoteClientPool(ServerHealth(base_s=0.3, max_s=1.0))
    return middleware


def parent(middleware: BackgroundSubagentMiddleware, *rules: Any) -> Any:
    model = ScriptedChatModel(
        rules=[
            ("PARENT start", [start(("slow job", "remote-worker")), "started"]),
            ("PARENT again", [start(("another job", "remote-worker")), "tried"]),
            ("PARENT check", [on_task("check_async_task"), "checked"]),
            ("PARENT list", [{"tool_calls": [tool_call("list_async_tasks")]}, "listed"]),
            ("PARENT cancel", [on_task("cancel_async_task"), "cancelled"]),
            ("PARENT steer", [on_task("update_async_task", message="Wrap up now"), "steered"]),
            *rules,
            (NOTICE, ["noted"]),
        ],
        default="ok",
    )
    return create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"faults-{time.monotonic_ns()}"}}


def turn(run: Any, agent: Any, text: str, config: dict[str, Any]) -> dict[str, Any]:
    """One parent turn, failing the test if it never ends (a hung server never answers: a turn that waited on it
    would not); what it says (a note or error naming the deadline it gave up at) shows it did not wait."""
    return returns(lambda: run(agent, user(text), config))


def sdk(url: str) -> Any:
    from langgraph_sdk import get_sync_client

    return get_sync_client(url=url, api_key=None)


def stop_on_server(url: str, record: dict[str, Any]) -> None:
    """Free the server's worker: cancel the task's run if it still goes."""
    try:
        sdk(url).runs.cancel(record["thread_id"], record["run_id"])
    except Exception:  # noqa: BLE001 - it may have ended already
        pass


# -- what is sent --------------------------------------------------------------


def test_no_api_key_from_the_environment_reaches_a_remote_server(run, monkeypatch):
    for name in ENV_KEYS:
        monkeypatch.setenv(name, f"leaked-{name}")
    server = RecordingServer()
    try:
        middleware = BackgroundSubagentMiddleware([worker(server.url, headers={"x-team": "blue"})],
        settings=DelegationSettings.of(general_purpose=False))
        agent, config = parent(middleware), thread()
        for text in ("PARENT start", "PARENT check", "PARENT list"):
            run(agent, user(text), config)
        assert len(server.requests) >= 4, server.requests
        assert server.header_values("x-api-key") == [None] * len(server.requests)
        sent = json.dumps([r["headers"] for r in server.requests])
        assert "leaked-" not in sent
        assert set(server.header_values("x-team")) == {"blue"}
    finally:
        server.close()


def test_only_the_specs_own_key_is_sent(monkeypatch):
    monkeypatch.setenv("LANGSMITH_API_KEY", "leaked-env-key")
    monkeypatch.setenv("TEAM_SERVER_KEY", "team-key")
    server = RecordingServer()
    try:
        direct = RemoteSubagentSpec(name="direct", description="d", graph_id="g", url=server.url,
                                    api_key="direct-key")
        named = RemoteSubagentSpec(name="named", description="d", graph_id="g", url=server.url,
                                   api_key_env="TEAM_SERVER_KEY")
        unset = RemoteSubagentSpec(name="unset", description="d", graph_id="g", url=server.url,
                                   api_key_env="NO_SUCH_KEY_VARIABLE")
        assert "direct-key" not in repr(direct) and "direct-key" not in str(direct.model_dump())
        runner = RemoteTaskRunner([direct, named, unset], pool=RemoteClientPool())
        for name in ("direct", "named"):
            _RT.run(runner.start(f"t-{name}", name, "job", parent_thread_id="p", tool_call_id="c"))
            keys = {r["headers"].get("x-api-key") for r in server.requests}
            assert keys == {f"{name}-key" if name == "direct" else "team-key"}, keys
            server.requests.clear()
        with pytest.raises(RemoteConfigError, match="NO_SUCH_KEY_VARIABLE"):
            _RT.run(runner.start("t-unset", "unset", "job", parent_thread_id="p", tool_call_id="c"))
        assert server.requests == []
    finally:
        server.close()


@pytest.mark.parametrize("fields", [
    {"api_key": "a", "api_key_env": "B"},
    {"api_key": "a", "headers": {"X-Api-Key": "b"}},
])
def test_a_key_given_two_ways_is_refused(fields):
    with pytest.raises(SpecError, match="one way only"):
        BackgroundSubagentMiddleware([worker("http://127.0.0.1:1", **fields)])


@pytest.mark.parametrize("url", ["not-a-url", "ftp://example.com", "127.0.0.1:2024", "http://", "", "http://h:99999"])
def test_bad_urls_are_refused_when_the_spec_is_made(url):
    with pytest.raises(SpecError, match="field 'url'.*http:// or https://"):
        BackgroundSubagentMiddleware([worker(url)])


def test_agents_on_one_server_share_one_connection_and_closing_is_not_fatal():
    server = RecordingServer()
    try:
        # Agents that share a runtime share its loop's HTTP clients.
        agents = [BackgroundSubagentMiddleware([worker(server.url)], settings=DelegationSettings.of(
            general_purpose=False, background_runtime=_RT,
        ))
                  for _ in range(40)]
        for i, middleware in enumerate(agents):
            _RT.run(middleware.tasks.remote.start(
                f"share-{i}", "remote-worker", "job", parent_thread_id="p", tool_call_id=f"c{i}"))
        assert len({r["client_port"] for r in server.requests}) == 1
        _RT.run(_close_shared())
        _RT.run(agents[0].tasks.remote.start(
            "share-after", "remote-worker", "job", parent_thread_id="p", tool_call_id="c"))
        assert len({r["client_port"] for r in server.requests}) == 2
    finally:
        server.close()


async def _close_shared() -> None:
    await shared_client_pool().aclose()


# -- a hung server ----------------------------------------------------------------


def test_a_hung_server_never_stalls_the_parent(run, langgraph_server):
    proxy = FaultProxy(langgraph_server)
    middleware = quick_backoff(BackgroundSubagentMiddleware(
        [worker(proxy.url, request_timeout_s=1, start_timeout_s=1)], settings=DelegationSettings.of(
            general_purpose=False,
        )))
    agent, config = parent(middleware), thread()
    out = run(agent, user("PARENT start"), config)
    (record,) = ledger(out).values()
    try:
        proxy.hang()
        out = turn(run, agent, "PARENT news", config)
        note = ledger(out)[record["id"]]["note"]
        assert note.startswith("unreachable") and proxy.url in note and "no answer within" in note, note
        assert ledger(out)[record["id"]]["status"] in ("pending", "running")
        assert "not checked" in notices(out)[-1] and proxy.url in notices(out)[-1]

        out = turn(run, agent, "PARENT check", config)
        assert as_json(last_tool_result(out))["note"].startswith("unreachable")
        out = turn(run, agent, "PARENT list", config)
        assert as_json(last_tool_result(out))[0]["note"].startswith("unreachable")
        out = turn(run, agent, "PARENT again", config)
        failed = last_tool_result(out)
        assert failed.status == "error" and proxy.url in failed.content

        proxy.up()
        out = wait_for(lambda: (o := run(agent, user("PARENT news"), config))
                       and not ledger(o)[record["id"]].get("note") and o, timeout=15, every=0.3)
        assert ledger(out)[record["id"]]["status"] in ("pending", "running")
    finally:
        proxy.close()
        stop_on_server(langgraph_server, record)


def test_a_start_against_a_hung_server_is_bounded_and_names_it(run):
    proxy = FaultProxy("http://127.0.0.1:9")  # never forwarded to: it hangs from the start
    proxy.hang()
    try:
        middleware = quick_backoff(BackgroundSubagentMiddleware(
            [worker(proxy.url, start_timeout_s=1)], settings=DelegationSettings.of(general_purpose=False)))
        out = turn(run, parent(middleware), "PARENT start", thread())
        failed = last_tool_result(out)
        assert failed.status == "error" and proxy.url in failed.content and "no answer within 1 s" in failed.content
        assert [r["status"] for r in ledger(out).values()] == ["error"]  # the failed start has its record
    finally:
        proxy.close()


# -- a dead server -----------------------------------------------------------------


def test_a_dead_server_costs_no_turn_more_than_a_moment(run, langgraph_server):
    proxy = FaultProxy(langgraph_server)
    middleware = quick_backoff(BackgroundSubagentMiddleware([worker(proxy.url)], settings=DelegationSettings.of(
        general_purpose=False,
    )))
    agent, config = parent(middleware), thread()
    out = run(agent, user("PARENT start"), config)
    (record,) = ledger(out).values()
    try:
        proxy.down()
        for text in ("PARENT news", "PARENT check", "PARENT list", "PARENT steer", "PARENT cancel"):
            out = turn(run, agent, text, config)
        assert ledger(out)[record["id"]]["note"].startswith("unreachable")
        assert last_tool_result(out).status == "error" and proxy.url in last_tool_result(out).content

        proxy.up()
        time.sleep(1.1)  # the circuit's longest interval here
        out = run(agent, user("PARENT cancel"), config)
        assert ledger(out)[record["id"]]["status"] == "cancelled" and not ledger(out)[record["id"]]["note"]
    finally:
        proxy.close()
        stop_on_server(langgraph_server, record)


def test_a_killed_and_restarted_server(own_langgraph_server):
    run = Runner("sync")  # one mode: a restart costs seconds
    server = own_langgraph_server
    middleware = quick_backoff(BackgroundSubagentMiddleware([worker(server.url)], settings=DelegationSettings.of(
        general_purpose=False,
    )))
    agent, config = parent(middleware, ("PARENT retry", [on_task("retry_async_task"), "retried"])), thread()
    out = run(agent, user("PARENT start"), config)
    (record,) = ledger(out).values()
    server.kill()
    try:
        out = turn(run, agent, "PARENT news", config)
        assert ledger(out)[record["id"]]["note"].startswith("unreachable")
    finally:
        server.start()
    time.sleep(1.1)
    out = run(agent, user("PARENT news"), config)
    after = ledger(out)[record["id"]]
    assert not after.get("note")
    if after["status"] == "lost":  # the in-memory server forgot the thread
        assert server.url in after["error"] and "retry_async_task" in after["error"]
        out = run(agent, user("PARENT retry"), config)
        after = ledger(out)[record["id"]]
        assert after["attempt"] == 2 and after["thread_id"] == task_thread_id(record["id"], 2)
    assert after["status"] in ("pending", "running")
    stop_on_server(server.url, after)


# -- starts -------------------------------------------------------------------------


def test_starting_the_same_task_twice_adopts_the_first_run(langgraph_server):
    runner = RemoteTaskRunner([RemoteSubagentSpec.model_validate(worker(langgraph_server))],
                              pool=RemoteClientPool())
    task_id = f"twice-{time.monotonic_ns()}"
    first = _RT.run(runner.start(task_id, "remote-worker", "slow job", parent_thread_id="p",
                                               tool_call_id="c"))
    again = _RT.run(runner.start(task_id, "remote-worker", "slow job", parent_thread_id="p",
                                               tool_call_id="c"))
    try:
        assert (again["thread_id"], again["run_id"]) == (first["thread_id"], first["run_id"])
        client = sdk(langgraph_server)
        assert len(client.threads.search(metadata={"subagent_task_id": task_id})) == 1
        assert len(client.runs.list(first["thread_id"])) == 1
    finally:
        stop_on_server(langgraph_server, first)


def test_a_wrong_graph_id_names_the_server_and_leaves_no_thread(langgraph_server):
    spec = RemoteSubagentSpec.model_validate({**worker(langgraph_server), "graph_id": "no_such_graph"})
    runner = RemoteTaskRunner([spec], pool=RemoteClientPool())
    parent_id = f"wrong-graph-{time.monotonic_ns()}"
    with pytest.raises(RemoteStartError) as caught:
        _RT.run(runner.start("t", "remote-worker", "job", parent_thread_id=parent_id,
                                           tool_call_id="c"))
    assert langgraph_server in str(caught.value) and "no_such_graph" in str(caught.value)
    assert sdk(langgraph_server).threads.search(metadata={"parent_thread_id": parent_id}) == []


# -- waiting --------------------------------------------------------------------------


def test_wait_for_background_waits_for_remote_tasks_or_says_it_cannot(langgraph_server):
    middleware = BackgroundSubagentMiddleware([worker(langgraph_server)], settings=DelegationSettings.of(
        general_purpose=False,
    ))
    model = ScriptedChatModel(rules=[("PARENT two", [start(("quick job", "remote-worker"),
                                                           ("slow job", "remote-worker")), "ok"])],
                              default="ok")
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    out = agent.invoke(user("PARENT two"), thread())
    quick, slow = sorted(ledger(out).values(), key=lambda r: r["description"])
    try:
        with pytest.raises(ValueError, match="tasks="):
            wait_for_background(ledger(out))
        assert wait_for_background({quick["id"]: quick}, timeout_s=15, tasks=middleware.tasks)
        assert middleware.tasks.remote.specs and live_status(middleware, quick) == "completed"
        assert not returns(lambda: wait_for_background({slow["id"]: slow}, timeout_s=1, tasks=middleware.tasks))
        assert live_status(middleware, slow) in ("pending", "running")  # not waited for: it runs for minutes
    finally:
        stop_on_server(langgraph_server, slow)


def live_status(middleware: BackgroundSubagentMiddleware, record: dict[str, Any]) -> str:
    return middleware.tasks.runtime.run(middleware.tasks.check(record))[0]["status"]


# -- polling cost -------------------------------------------------------------------------


def test_a_turn_with_many_live_tasks_polls_each_server_once(langgraph_server):
    proxy = FaultProxy(langgraph_server)
    middleware = BackgroundSubagentMiddleware([worker(proxy.url)], settings=DelegationSettings.of(
        general_purpose=False,
    ))
    jobs = [(f"slow job {i}", "remote-worker") for i in range(12)]
    agent = parent(middleware, ("PARENT many", [start(*jobs), "started"]))
    config = thread()
    out = agent.invoke(user("PARENT many"), config)
    records = list(ledger(out).values())
    try:
        assert len(records) == 12
        proxy.requests = 0
        out = agent.invoke(user("PARENT news"), config)
        assert proxy.requests == 1, f"{proxy.requests} requests for one turn with 12 live tasks"
        assert {r["status"] for r in ledger(out).values()} <= {"pending", "running"}
    finally:
        proxy.close()
        for record in records:
            stop_on_server(langgraph_server, record)


@pytest.mark.parametrize("fields, named", [
    ({"headers": {"X-Team": "bleu é"}}, r"header 'X-Team' must be printable ASCII \(it holds 'é', U\+00E9\)"),
    ({"headers": {"X-Team": "a\x00b"}}, r"header 'X-Team' must be printable ASCII"),
    ({"api_key": "k\u00ffey"}, r"field 'api_key'.*the key must be printable ASCII"),
])
def test_a_header_no_http_client_can_send_is_refused_when_the_spec_is_made(fields, named):
    with pytest.raises(SpecError, match=named):
        BackgroundSubagentMiddleware([worker("http://127.0.0.1:1", **fields)])


@pytest.mark.parametrize("key, named", [
    ("key\twith\u2028separator", "must be printable ASCII"),
    ("secret ", "must not begin or end with a space or tab"),  # the HTTP client refuses it as a protocol error
])
def test_a_key_in_the_environment_no_http_client_can_send_names_the_variable(monkeypatch, key, named):
    monkeypatch.setenv("TEAM_SERVER_KEY", key)
    server = RecordingServer()
    try:
        spec = RemoteSubagentSpec(name="named", description="d", graph_id="g", url=server.url,
                                  api_key_env="TEAM_SERVER_KEY")
        runner = RemoteTaskRunner([spec], pool=RemoteClientPool())
        with pytest.raises(RemoteConfigError, match=rf"the key in 'TEAM_SERVER_KEY' {named}"):
            _RT.run(runner.start("t-named", "named", "job", parent_thread_id="p", tool_call_id="c"))
        assert server.requests == []
    finally:
        server.close()
