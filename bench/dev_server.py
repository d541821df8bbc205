"""Run ``langgraph dev`` on a free loopback port, for tests and benchmarks: start, kill, restart.

What makes it a reliable fixture:

* ``LANGGRAPH_CLI_NO_ANALYTICS=1`` and ``LANGGRAPH_NO_VERSION_CHECK=true``,
  so it never reaches the network;
* ``--no-reload``, and ``jobs_per_worker`` above 1 (with one job per
  worker, a run that waits on another run deadlocks);
* a temporary working directory, because it persists ``.langgraph_api/``
  in its working directory -- and it resolves the graph paths and
  dependencies of ``langgraph.json`` against that directory too, so the
  directory mirrors the project's top level with symlinks and its
  ``langgraph.json`` is served unchanged;
* a free loopback port, checked after start-up: asked for a port that is
  taken, the server silently moves to another one.

Example::

    with LangGraphDevServer(project_dir=".", workdir=tmp) as server:
        url = server.url          # "http://127.0.0.1:<port>"
        server.kill()             # SIGKILL: gone, with its in-memory threads
        server.start()            # up again on the same port
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
from pathlib import Path
from types import TracebackType

from subagents._errors import SubagentsError

_NOT_MIRRORED = {".git", ".langgraph_api", ".venv", "__pycache__"}
_API_LINE = re.compile(r"API:\s*(?:\x1b\[[0-9;]*m)?http://[^:\s]+:(\d+)")
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
STARTUP_TIMEOUT_S = 90.0


class DevServerError(SubagentsError, RuntimeError):
    """``langgraph dev`` did not come up; the message ends with its log."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bypass_proxies_for_loopback() -> None:
    """Loopback traffic must never go through a proxy the environment may set."""
    for name in ("NO_PROXY", "no_proxy"):
        os.environ[name] = ",".join(p for p in (os.environ.get(name), "127.0.0.1", "localhost") if p)


class LangGraphDevServer:
    """One ``langgraph dev`` process serving ``project_dir``'s ``langgraph.json`` from ``workdir``.

    Args:
        project_dir: the folder with ``langgraph.json``.
        workdir: an empty folder to run in (mirrors ``project_dir``).
        jobs_per_worker: runs the server executes at once.
        env: more environment variables for the server.
    """

    def __init__(self, project_dir: str | Path, workdir: str | Path, *, jobs_per_worker: int = 4,
                 env: dict[str, str] | None = None) -> None:
        self.project_dir, self.workdir = Path(project_dir).resolve(), Path(workdir)
        self.jobs_per_worker = jobs_per_worker
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = self.workdir / "server.log"
        self._env = dict(env or {})
        self._process: subprocess.Popen[bytes] | None = None
        for entry in self.project_dir.iterdir():
            target = self.workdir / entry.name
            if entry.name not in _NOT_MIRRORED and not target.exists():
                target.symlink_to(entry, target_is_directory=entry.is_dir())

    def start(self, timeout_s: float = STARTUP_TIMEOUT_S) -> str:
        """Start the server (on the same port as before) and wait until it answers; return its url."""
        bypass_proxies_for_loopback()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")},
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGGRAPH_NO_VERSION_CHECK": "true",
            "PYTHONPATH": os.pathsep.join(p for p in (str(self.workdir), os.environ.get("PYTHONPATH")) if p),
            "PYTHONUNBUFFERED": "1",
            **self._env,
        }
        command = [
            sys.executable, "-m", "langgraph_cli", "dev",
            "--host", "127.0.0.1", "--port", str(self.port),
            "--no-browser", "--no-reload", "--n-jobs-per-worker", str(self.jobs_per_worker),
            "--config", str(self.workdir / "langgraph.json"),
        ]
        with self.log.open("wb") as sink:
            self._process = subprocess.Popen(command, cwd=self.workdir, env=env, stdout=sink,
                                             stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not (self.is_up() and self._bound_port() is not None):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise DevServerError(f"langgraph dev did not come up on {self.url}:\n{self._tail()}")
            time.sleep(0.2)
        if self._bound_port() != self.port:
            self.stop()
            raise DevServerError(f"langgraph dev was asked for port {self.port} but bound {self._bound_port()}")
        return self.url

    def is_up(self) -> bool:
        try:
            with _DIRECT.open(f"{self.url}/ok", timeout=1) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL the server's process group: it is gone at once, with everything in memory."""
        self._signal(signal.SIGKILL, wait_s=10)

    def stop(self) -> None:
        """Stop the server politely (SIGTERM), forcefully if it does not go."""
        try:
            self._signal(signal.SIGTERM, wait_s=15)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL, wait_s=5)

    def _signal(self, sig: int, wait_s: float) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        process.wait(timeout=wait_s)

    def _bound_port(self) -> int | None:
        match = _API_LINE.search(self.log.read_text(errors="replace")) if self.log.exists() else None
        return int(match.group(1)) if match else None

    def _tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else "(no log)"

    def __enter__(self) -> LangGraphDevServer:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
