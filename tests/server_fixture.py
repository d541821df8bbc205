"""A real ``langgraph dev`` server for the remote background tests, started once per session.

What this server needs to be a reliable test fixture:

* ``LANGGRAPH_CLI_NO_ANALYTICS=1`` and ``LANGGRAPH_NO_VERSION_CHECK=true``,
  so it never reaches the network;
* ``--no-reload``, and ``--n-jobs-per-worker`` above 1 (with one job per
  worker, a run that waits on another run deadlocks);
* a temporary working directory, because it persists ``.langgraph_api/``
  in its working directory -- and it resolves the graph paths and
  dependencies of ``langgraph.json`` against that directory too, so the
  directory mirrors the repository's top level with symlinks and the
  project's own ``langgraph.json`` is served unchanged;
* a free loopback port, checked after start-up: asked for a port that is
  taken, the server silently moves to another one.

Use it by importing the fixture into a test module::

    from server_fixture import langgraph_server  # noqa: F401

    def test_x(langgraph_server):
        url = langgraph_server   # "http://127.0.0.1:<port>"
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_NOT_MIRRORED = {".git", ".langgraph_api", ".venv", "__pycache__"}
_API_LINE = re.compile(r"API:\s*(?:\x1b\[[0-9;]*m)?http://[^:\s]+:(\d+)")
STARTUP_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def mirror_repo(workdir: Path) -> None:
    """Symlink the repository's top-level entries into ``workdir``."""
    for entry in REPO.iterdir():
        if entry.name not in _NOT_MIRRORED:
            (workdir / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _is_up(url: str) -> bool:
    try:
        with _DIRECT.open(f"{url}/ok", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


def _bound_port(log: Path) -> int | None:
    match = _API_LINE.search(log.read_text(errors="replace")) if log.exists() else None
    return int(match.group(1)) if match else None


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="session")
def langgraph_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a ``langgraph dev`` server serving this repository's ``langgraph.json``."""
    # Loopback traffic must never go through a proxy the environment may set.
    for name in ("NO_PROXY", "no_proxy"):
        os.environ[name] = ",".join(p for p in (os.environ.get(name), "127.0.0.1", "localhost") if p)
    workdir = tmp_path_factory.mktemp("langgraph-server")
    mirror_repo(workdir)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = workdir / "server.log"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")},
        # The example deep agent runs on the scripted model: the tests stay offline.
        "DEEP_AGENT_SCRIPTED": "1",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "PYTHONPATH": os.pathsep.join(p for p in (str(workdir), os.environ.get("PYTHONPATH")) if p),
        "PYTHONUNBUFFERED": "1",
    }
    command = [
        sys.executable, "-m", "langgraph_cli", "dev",
        "--host", "127.0.0.1", "--port", str(port),
        "--no-browser", "--no-reload", "--n-jobs-per-worker", "4",
        "--config", str(workdir / "langgraph.json"),
    ]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=workdir, env=env, stdout=sink,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not (_is_up(url) and _bound_port(log) is not None):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-4000:]
                pytest.fail(f"langgraph dev did not come up on {url}:\n{tail}")
            time.sleep(0.2)
        bound = _bound_port(log)
        if bound != port:
            pytest.fail(f"langgraph dev was asked for port {port} but bound {bound}")
        yield url
    finally:
        _stop(process)
