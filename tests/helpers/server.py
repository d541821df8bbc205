"""Real ``langgraph dev`` servers for the remote background tests (see ``bench/dev_server.py``).

``langgraph_server`` is one server for the whole session; ``own_langgraph_server``
is a server of the test module's own, which its tests may kill and restart
(each test leaves it running). Both serve the repository's ``langgraph.json``
on the scripted model, so they stay offline.

``tests/conftest.py`` registers both fixtures; a test asks for one by name::

    def test_x(langgraph_server):
        url = langgraph_server   # "http://127.0.0.1:<port>"
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.dev_server import DevServerError, LangGraphDevServer
from helpers import REPO

SCRIPTED = {"DEEP_AGENT_SCRIPTED": "1"}


def _serve(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[LangGraphDevServer]:
    server = LangGraphDevServer(REPO, tmp_path_factory.mktemp(name), env=SCRIPTED)
    try:
        server.start()
    except DevServerError as exc:
        pytest.fail(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def langgraph_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a ``langgraph dev`` server serving this repository's ``langgraph.json``."""
    for server in _serve(tmp_path_factory, "langgraph-server"):
        yield server.url


@pytest.fixture(scope="module")
def own_langgraph_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LangGraphDevServer]:
    """A server this module's tests may kill and restart (each leaves it up)."""
    yield from _serve(tmp_path_factory, "own-langgraph-server")
