"""``deep-agent run --base-url``, ``--api-key-env``, ``--timeout`` and ``--retries`` against real HTTP servers.

A local server needs no key; ``--timeout`` bounds a model call with its
retries (LangChain's OpenAI client used to resend a timed-out request twice,
silently: three requests and three timeouts per call); ``--retries N`` resends
N times within that bound.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers.chat_server import CARRIED_ON, ScriptedChatServer
from helpers.cli import cli


class SilentServer:
    """Accepts every request and never answers (until closed): each request is counted."""

    def __init__(self) -> None:
        self.requests = 0
        self.closing = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                server.requests += 1
                server.closing.wait(60)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.closing.set()
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


@pytest.fixture
def scripted() -> Iterator[ScriptedChatServer]:
    server = ScriptedChatServer()
    yield server
    server.close()


def test_a_local_server_by_base_url_needs_no_key_and_takes_a_bare_model_name(scripted, tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    run = cli("run", "hello", "--base-url", scripted.url, "--model", "smollm2", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert CARRIED_ON in run.stdout
    assert scripted.requests, "the run never reached the server"


def test_a_missing_key_variable_is_a_bad_argument_naming_it(scripted, tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    run = cli("run", "hello", "--base-url", scripted.url, "--api-key-env", "TEAM_LLM_KEY", cwd=tmp_path)
    assert run.returncode == 2
    assert "--api-key-env TEAM_LLM_KEY: the variable TEAM_LLM_KEY is not set" in run.stderr
    assert not scripted.requests


@pytest.mark.parametrize("retries", [0, 1])
def test_the_timeout_bounds_a_call_with_its_retries(silent, tmp_path: Path, retries: int) -> None:
    (tmp_path / "home").mkdir()
    run = cli("run", "hello", "--base-url", silent.url, "--timeout", "2", "--retries", str(retries), cwd=tmp_path)
    assert run.returncode != 0
    assert "timed out" in (run.stdout + run.stderr).lower(), run.stdout + run.stderr
    # Before: 3 requests of the full timeout each, whatever was asked. Counted, not timed: the suite holds on a
    # busy machine, where the command line's own exit can outlast any fixed bound.
    assert silent.requests == retries + 1


def test_a_server_that_parses_no_tool_call_gets_one_line_naming_the_flag_to_pass(tmp_path: Path) -> None:
    """Before, Python's own warning text (located in asyncio/events.py) named ``force_delegation=True``."""
    (tmp_path / "home").mkdir()
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "helper.md").write_text("---\nname: helper\ndescription: Helps.\n---\nYou help.\n")
    server = ScriptedChatServer(caps={"supports_tools": False, "supports_tool_calls": False})
    try:
        run = cli("run", "hello", "--base-url", server.url, "--model", "smollm2", cwd=tmp_path)
    finally:
        server.close()
    assert run.returncode == 0, run.stderr
    warned = [line for line in run.stderr.splitlines() if "tool call" in line]
    assert len(warned) == 1, run.stderr
    assert warned[0].startswith("deep-agent: warning: the model server at ") and "--force-delegation" in warned[0]
    assert "force_delegation=True" not in run.stderr and "Warning:" not in run.stderr and ".py:" not in run.stderr
