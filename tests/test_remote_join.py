"""Waiting for remote tasks on the server's join: told when a run ends, bounded when the server is not.

``wait_for_background`` joins each live remote task's run (a server
long-poll) and refreshes once when a join answers. These tests try to break
that: a wait that must be woken by the join, not the poll; a server that
never answers joins; a server killed mid-wait; a deadline shorter than the
run; and the cap on joins open at once. Each wait must return on time,
``False`` if it did not settle, and never raise.
"""

from __future__ import annotations

import http.client
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from background_support import ledger, start
from conftest import user
from deep_agent.testing import ScriptedChatModel
from middleware import BackgroundSubagentMiddleware
from server_fixture import langgraph_server, own_langgraph_server  # noqa: F401 - the fixtures
from subagents import wait_for_background
from subagents.background._remote_clients import RemoteClientPool
from subagents.background._remote_health import ServerHealth

_HOP_HEADERS = {"connection", "transfer-encoding", "content-length", "keep-alive"}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # parallel starts and joins: no connection refused for a full backlog


class JoinProxy:
    """An HTTP proxy on loopback that forwards to ``upstream``; joins can be told to hang.

    It counts the joins open at once (``most_joins``) and in all (``joins``).
    """

    def __init__(self, upstream_url: str, *, hang_joins: bool = False) -> None:
        host, port = upstream_url.removeprefix("http://").split(":")
        proxy = self
        self.hang_joins = hang_joins
        self.joins = self.open_joins = self.most_joins = 0
        self._lock = threading.Lock()
        self._closed = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                is_join = self.path.split("?")[0].endswith("/join")
                if is_join:
                    proxy._joined(+1)
                try:
                    if is_join and proxy.hang_joins:
                        proxy._closed.wait(60)  # never answers while the test runs
                        return
                    upstream = http.client.HTTPConnection(host, int(port), timeout=60)
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
                    upstream.request(self.command, self.path, body=body or None, headers=headers)
                    answer = upstream.getresponse()
                    data = answer.read()
                    upstream.close()
                finally:
                    if is_join:
                        proxy._joined(-1)
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in _HOP_HEADERS:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

        self._server = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _joined(self, step: int) -> None:
        with self._lock:
            self.open_joins += step
            if step > 0:
                self.joins += 1
                self.most_joins = max(self.most_joins, self.open_joins)

    def close(self) -> None:
        self._closed.set()
        self._server.shutdown()
        self._server.server_close()


def worker(url: str, **extra: Any) -> dict[str, Any]:
    return {"name": "remote-worker", "description": "Works on a LangGraph Server.",
            "graph_id": "scripted_worker", "url": url, **extra}


def started(url: str, jobs: list[str], pool: RemoteClientPool | None = None,
            **extra: Any) -> tuple[BackgroundSubagentMiddleware, dict[str, dict[str, Any]]]:
    """A middleware whose one parent turn started ``jobs`` on the server at ``url``, and its ledger."""
    middleware = BackgroundSubagentMiddleware([worker(url, **extra)], general_purpose=False)
    if pool is not None:
        middleware.tasks.remote.client_pool = pool
    model = ScriptedChatModel(rules=[("PARENT go", [start(*[(j, "remote-worker") for j in jobs]), "ok"])],
                              default="ok")
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    out = agent.invoke(user("PARENT go"), {"configurable": {"thread_id": f"join-{time.monotonic_ns()}"}})
    records = ledger(out)
    assert len(records) == len(jobs), out["messages"]
    return middleware, records


def timed_wait(records: dict[str, dict[str, Any]], middleware: BackgroundSubagentMiddleware,
               timeout_s: float, every_s: float = 0.05) -> tuple[bool, float]:
    began = time.monotonic()
    settled = wait_for_background(records, timeout_s=timeout_s, tasks=middleware.tasks, every_s=every_s)
    return settled, time.monotonic() - began


def statuses(middleware: BackgroundSubagentMiddleware, records: dict[str, dict[str, Any]]) -> set[str]:
    return {middleware.tasks.runtime.run(middleware.tasks.check(r))[0]["status"] for r in records.values()}


def cancel_all(url: str, records: dict[str, dict[str, Any]]) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url, api_key=None)
    for record in records.values():
        try:
            client.runs.cancel(record["thread_id"], record["run_id"])
        except Exception:  # noqa: BLE001 - it may have ended already
            pass


def test_the_join_wakes_the_wait_not_the_poll_interval(langgraph_server):
    proxy = JoinProxy(langgraph_server)
    try:
        middleware, records = started(proxy.url, ["quick job 1", "quick job 2"])
        # Polling every 20 s would take 20 s: only a join can end this wait in time.
        settled, took = timed_wait(records, middleware, timeout_s=15, every_s=20)
        assert settled and took < 8, f"settled={settled} after {took:.1f} s"
        assert proxy.joins >= 2
        assert statuses(middleware, records) == {"completed"}
    finally:
        proxy.close()


def test_joins_open_at_once_are_capped_per_server(langgraph_server):
    proxy = JoinProxy(langgraph_server)
    try:
        pool = RemoteClientPool(max_joins=2)
        middleware, records = started(proxy.url, [f"quick job {i}" for i in range(6)], pool=pool)
        settled, took = timed_wait(records, middleware, timeout_s=30)
        assert settled, f"not settled after {took:.1f} s"
        assert 1 <= proxy.most_joins <= 2, proxy.most_joins
        assert statuses(middleware, records) == {"completed"}
    finally:
        proxy.close()


def test_the_join_cap_must_be_positive():
    with pytest.raises(ValueError, match="max_joins"):
        RemoteClientPool(max_joins=0)


def test_a_server_that_hangs_on_join_still_settles_by_polling(langgraph_server):
    proxy = JoinProxy(langgraph_server, hang_joins=True)
    try:
        middleware, records = started(proxy.url, ["quick job a", "quick job b"], timeout_s=2)
        settled, took = timed_wait(records, middleware, timeout_s=20)
        assert settled and took < 8, f"settled={settled} after {took:.1f} s"
        assert proxy.joins >= 2 and statuses(middleware, records) == {"completed"}
    finally:
        proxy.close()


def test_a_server_that_hangs_on_join_and_a_short_deadline_return_false_on_time(langgraph_server):
    proxy = JoinProxy(langgraph_server, hang_joins=True)
    middleware, records = started(proxy.url, ["slow job"])
    try:
        settled, took = timed_wait(records, middleware, timeout_s=1.0, every_s=10)
        assert settled is False and 0.9 <= took < 1.6, f"settled={settled} after {took:.2f} s"
    finally:
        proxy.close()
        cancel_all(langgraph_server, records)


def test_a_deadline_shorter_than_the_run_returns_false_on_time(langgraph_server):
    middleware, records = started(langgraph_server, ["slow job x", "slow job y"])
    try:
        for every_s in (0.05, 30.0):
            settled, took = timed_wait(records, middleware, timeout_s=0.8, every_s=every_s)
            assert settled is False and 0.7 <= took < 1.4, f"every_s={every_s}: {settled} after {took:.2f} s"
        assert statuses(middleware, records) <= {"pending", "running"}
    finally:
        cancel_all(langgraph_server, records)


def test_a_server_killed_during_the_wait_returns_false_on_time(own_langgraph_server):
    server = own_langgraph_server
    pool = RemoteClientPool(ServerHealth(base_s=0.3, max_s=1.0))
    middleware, records = started(server.url, ["slow job k1", "slow job k2"], pool=pool, timeout_s=1)
    killer = threading.Timer(0.5, server.kill)
    killer.start()
    try:
        settled, took = timed_wait(records, middleware, timeout_s=2.5)
        assert settled is False and 2.4 <= took < 3.2, f"settled={settled} after {took:.2f} s"
    finally:
        killer.join()
        server.start()
