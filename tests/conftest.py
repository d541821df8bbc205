"""Fixtures for every test, registered here and defined in ``helpers/``; the markers that follow from them.

Nothing else lives here but the one command-line option, ``--refresh-notebooks``
(``integration/notebooks``): helpers are imported explicitly from ``helpers``.
A test that asks for a server fixture is marked for it (``server``,
``postgres``, ``realmodel``) and, under pytest-xdist's ``--dist loadgroup``,
runs on the worker that already has that server, so a session starts each
server once. The markers of ``tests/integration/`` follow its folders
(``tests/integration/conftest.py``).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from helpers.aegra import aegra_served_pair  # noqa: F401 - registers the fixture
from helpers.graphs import Runner
from helpers.local_model import local_model  # noqa: F401 - registers the fixture
from helpers.postgres import postgres_server, postgres_url  # noqa: F401 - registers the fixtures
from helpers.server import langgraph_server, own_langgraph_server  # noqa: F401 - registers the fixtures


def pytest_configure(config: pytest.Config) -> None:
    # A run started with Ctrl-C ignored (a script's background job: the shell ignores SIGINT there) tests Ctrl-C
    # all the same: the tests press it in this process and in processes it starts, which inherit the ignoring.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--refresh-notebooks", action="store_true",
        help="write each notebook's fresh outputs into it where they differ from the committed ones",
    )


@pytest.fixture(autouse=True)
def _own_stack_unless_deepagents_is_asked_for(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite checks this library's own stack, as built where the ``deepagents`` extra is not installed.

    With the extra (the bench installs it), ``create_deep_agent`` builds
    deepagents' own default stack; ``tests/deepagents_compat`` checks that
    one, and here it is built only when a test asks for it (deepagents'
    arguments, or ``deepagents_stack=True``).
    """
    if "deepagents_compat" in request.path.parts:
        return
    from deep_agent import _factory as factory

    real = factory.uses_deepagents

    def only_when_asked(choice: bool | None, **arguments: object) -> bool:
        asked = choice is not None or any(factory._given(v) for v in arguments.values())
        return real(choice if asked else False, **arguments)

    monkeypatch.setattr(factory, "uses_deepagents", only_when_asked)


@pytest.fixture(autouse=True)
def _hooks_are_confined_for_one_test() -> Iterator[None]:
    """A confinement one test installs (by making a sandboxed ``Bash``) is that test's: removed after it, so a
    later test's hooks and MCP servers do not run in an earlier test's (removed) workspace."""
    from subagents.definitions import _on_host as on_host

    yield
    on_host.confine(None)


@pytest.fixture(params=["sync", "async"])
def run(request: pytest.FixtureRequest) -> Runner:
    """Each behavioural test runs twice: on ``invoke`` and on ``ainvoke``."""
    return Runner(request.param)


SERVER_FIXTURES = {
    # fixture -> (markers, xdist group); a module-scoped server is grouped by module
    "langgraph_server": (("server",), "langgraph-server"),
    "own_langgraph_server": (("server",), None),
    "postgres_server": (("server", "postgres"), "postgres"),
    "local_model": (("server", "realmodel"), "local-model"),
}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if "postgres_url" in names:
            names.add("postgres_server")
        for fixture, (markers, group) in SERVER_FIXTURES.items():
            if fixture not in names:
                continue
            for marker in markers:
                item.add_marker(marker)
            if not any(item.iter_markers("xdist_group")):
                item.add_marker(pytest.mark.xdist_group(group or f"{fixture}:{item.module.__name__}"))
