"""Fixtures for every test, registered here and defined in ``helpers/``.

Nothing else lives here: helpers are imported explicitly from ``helpers``.
The markers of ``tests/integration/`` are set by ``tests/integration/conftest.py``.
"""

from __future__ import annotations

import pytest

from helpers.graphs import Runner
from helpers.local_model import local_model  # noqa: F401 - registers the fixture
from helpers.postgres import postgres_server, postgres_url  # noqa: F401 - registers the fixtures
from helpers.server import langgraph_server, own_langgraph_server  # noqa: F401 - registers the fixtures


@pytest.fixture(params=["sync", "async"])
def run(request: pytest.FixtureRequest) -> Runner:
    """Each behavioural test runs twice: on ``invoke`` and on ``ainvoke``."""
    return Runner(request.param)
