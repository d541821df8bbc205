"""Two specs on one url with different keys: each task is asked about with its own spec's key."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from helpers.fault_servers import RecordingServer
from subagents import RemoteSubagentSpec
from subagents.background._remote import RemoteClientPool, RemoteTaskRunner, ServerHealth, adopt_orphans
from subagents._runner import TASK_ID_METADATA_KEY

KEYS = {"a": "key-of-tenant-a", "b": "key-of-tenant-b"}


class TenantServer(RecordingServer):
    """Each key sees only the threads made with it (as on a server scoped per key)."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: dict[str, tuple[str, dict[str, Any]]] = {}

    def reply_to(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
        key = headers.get("x-api-key")
        if method == "POST" and path == "/threads/search":
            body = body or {}
            rows = [{"thread_id": tid, "status": "busy", "metadata": meta}
                    for tid, (owner, meta) in self.threads.items() if owner == key]
            if body.get("ids") is not None:
                rows = [r for r in rows if r["thread_id"] in body["ids"]]
            wanted = body.get("metadata") or {}
            return [r for r in rows if all(r["metadata"].get(k) == v for k, v in wanted.items())]
        if method == "GET" and path.split("?")[0].endswith("/runs"):
            tid = path.split("/")[2]
            owned = self.threads.get(tid, ("", {}))[0] == key
            return [{"run_id": f"run-{tid}", "status": "running"}] if owned else []
        return super().reply_to(method, path, body, headers)

    def owner_of(self, thread_id: str) -> str:
        return self.threads[thread_id][0]


@pytest.fixture
def server() -> Iterator[TenantServer]:
    tenant = TenantServer()
    for name, key in KEYS.items():
        for i in range(3):
            tenant.threads[f"{name}-thread-{i}"] = (key, {
                "parent_thread_id": "parent", "agent_type": name, "tool_call_id": f"call-{name}-{i}",
                TASK_ID_METADATA_KEY: f"{name}-task-{i}", "attempt": 1})
    yield tenant
    tenant.close()


def runner_for(server: TenantServer) -> RemoteTaskRunner:
    specs = [RemoteSubagentSpec(name=name, description="d", url=server.url, graph_id="g", api_key=key)
             for name, key in KEYS.items()]
    return RemoteTaskRunner(specs, pool=RemoteClientPool(ServerHealth()))


async def closing(runner: RemoteTaskRunner, work: Any) -> Any:
    try:
        return await work
    finally:
        await runner.pool.aclose()


def test_polling_asks_about_each_task_with_its_own_specs_key(server):
    records = [{"id": f"{name}-task-{i}", "agent_type": name, "runner": "remote", "status": "running",
                "thread_id": f"{name}-thread-{i}", "run_id": f"run-{i}", "note": None}
               for name in KEYS for i in range(3)]
    runner = runner_for(server)
    results = asyncio.run(closing(runner, runner.refresh_many(records)))
    searches = [r for r in server.requests if r["path"] == "/threads/search"]
    assert len(searches) == 2, [r["path"] for r in server.requests]
    for search in searches:
        assert {server.owner_of(tid) for tid in search["body"]["ids"]} == {search["headers"]["x-api-key"]}
    assert len(server.requests) == 2, "every task was found by its owner's search: no per-task reads"
    assert all(fields == {} and note is None for fields, note in results.values())


def test_adoption_searches_each_tenant_with_its_own_key(server):
    missing = {f"call-{name}-{i}": (name, f"job {i}") for name in KEYS for i in range(3)}
    runner = runner_for(server)
    records = asyncio.run(closing(runner, adopt_orphans(runner, "parent", missing)))
    assert sorted(records) == sorted(f"{name}-task-{i}" for name in KEYS for i in range(3))
    for task_id, record in records.items():
        assert record["thread_id"] == task_id.replace("task", "thread")
