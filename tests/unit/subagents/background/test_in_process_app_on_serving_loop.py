"""An in-process server app (aegra's) is called on the loop the parent awaits the background runtime from.

aegra's database and Redis connections belong to the loop it serves on, and
the parent's graph runs on that loop; the background runtime sends requests
from a loop thread of its own. Each request to the app must therefore run on
the parent's loop, not the runtime's. Before, a spec without a url in a
process serving aegra's app was refused ("does not run on one"), and a plain
ASGI transport would run the app on the runtime's loop (aegra then failed
with a future attached to a different loop).
"""

from __future__ import annotations

import asyncio
import sys
import types
from typing import Any

import pytest

from subagents import RemoteSubagentSpec
from subagents.background import BackgroundRuntime
from subagents.background._remote import AEGRA_APP_MODULE, RemoteClientPool


def _app(seen: list[asyncio.AbstractEventLoop]) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(asyncio.get_running_loop())
        await receive()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"thread_id": "t1"}'})
    return app


def test_requests_to_aegras_app_run_on_the_loop_the_parent_awaits_the_runtime_from(monkeypatch: pytest.MonkeyPatch):
    seen: list[asyncio.AbstractEventLoop] = []
    monkeypatch.setitem(sys.modules, AEGRA_APP_MODULE, types.SimpleNamespace(app=_app(seen)))
    spec = RemoteSubagentSpec(name="same-server-worker", description="d", graph_id="g")
    pool = RemoteClientPool()

    async def on_runtime_loop() -> tuple[Any, asyncio.AbstractEventLoop]:
        try:
            return await pool.client(spec).threads.get("t1"), asyncio.get_running_loop()
        finally:
            await pool.aclose()

    async def parent() -> tuple[Any, asyncio.AbstractEventLoop, asyncio.AbstractEventLoop]:
        with BackgroundRuntime() as runtime:
            answer, runtime_loop = await runtime.arun(on_runtime_loop())
        return answer, runtime_loop, asyncio.get_running_loop()

    answer, runtime_loop, parent_loop = asyncio.run(parent())
    assert answer == {"thread_id": "t1"}
    assert runtime_loop is not parent_loop
    assert seen == [parent_loop], "the app ran on the runtime's loop, not the parent's"
