"""A real aegra pair for the remote tests: two API instances on one Postgres and one Redis.

aegra (``aegra-api`` on PyPI) is a self-hosted server of the LangGraph API.
It needs Python >= 3.12, so it runs from a venv of its own with the project's
dependencies (so it can serve the project's own graphs too), made once and
kept under the pytest cache (keyed by the aegra version, the Python's and the
dependencies), from a ``python3.12`` on ``PATH`` or pyenv's
``~/.pyenv/versions/3.12*``; without one the tests skip, saying so. One venv
for every pair: building it is most of a pair's cost on a clean clone, and
``.ci/run`` builds it while ruff and mypy run (``python -m helpers.aegra``).
Redis is Debian's ``redis-server`` (``.ci/run`` installs it when missing),
started on a free loopback port with no persistence; Postgres is
:mod:`helpers.postgres`'s throwaway cluster.

The pair serves ``helpers/aegra_child/aegra.json`` (graphs ``child`` and
``approver``) unless told otherwise; the ``aegra_served_pair`` fixture serves
those and the project's own. Instance A runs the database migrations; B starts
after it, without.

Example::

    with aegra_pair(cache_dir) as (a, b):
        client = get_client(url=a.url)
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helpers.postgres import PostgresServer, free_port

AEGRA_VERSION = "0.11.0"
CHILD_DIR = Path(__file__).parent / "aegra_child"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120
QUICK_RECOVERY = {"LEASE_DURATION_SECONDS": "12", "HEARTBEAT_INTERVAL_SECONDS": "4", "REAPER_INTERVAL_SECONDS": "3"}
"""Worker leases short enough that a killed instance's runs are taken up in about 15 s, not 50
(aegra's defaults: 30 s lease, 10 s heartbeat, 15 s reaper); still three heartbeats per lease."""


def venv_folder(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the aegra venvs live: pytest's cache, kept between runs; without the cache plugin, this run's tmp folder."""
    cache = getattr(request.config, "cache", None)
    return Path(cache.mkdir("aegra")) if cache is not None else tmp_path_factory.mktemp("aegra")


def find_python312() -> str | None:
    """A Python 3.12 interpreter: ``python3.12`` on PATH, else pyenv's newest 3.12."""
    found = shutil.which("python3.12")
    if found and subprocess.run([found, "-c", "import venv"], capture_output=True).returncode == 0:
        return found
    versions = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))
    return versions[-1] if versions else None


def project_dependencies() -> list[str]:
    """The project's runtime dependencies (``pyproject.toml``): what a graph of this project imports."""
    import tomllib

    with open(PROJECT_ROOT / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def aegra_venv(cache_dir: Path) -> Path:
    """The venv with ``aegra-api`` and the project's runtime dependencies (made once, reused).

    Skips the test when no Python 3.12 exists. The project itself is not
    installed: it goes on the servers' ``PYTHONPATH``.
    """
    python = find_python312()
    if python is None:
        pytest.skip("aegra needs Python >= 3.12: no python3.12 on PATH nor under ~/.pyenv/versions/3.12*")
    minor = subprocess.run([python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    extra = project_dependencies()
    digest = hashlib.sha256("\n".join(extra).encode()).hexdigest()[:10]
    venv = cache_dir / f"aegra-api-{AEGRA_VERSION}-py{minor}-project-{digest}"
    marker = venv / "installed"
    if marker.exists():
        return venv
    cache_dir.mkdir(parents=True, exist_ok=True)
    # Several test workers may want the same venv at once, on a clean checkout: one builds it while the
    # others wait (without the lock one worker's rmtree cut another's pip install short, and aegra then
    # failed to import its own dependencies).
    with open(cache_dir / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return venv
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([python, "-m", "venv", str(venv)], check=True, capture_output=True)
        done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                               f"aegra-api=={AEGRA_VERSION}", *extra], capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            pytest.fail(f"pip install aegra-api=={AEGRA_VERSION} failed:\n{done.stderr[-3000:]}", pytrace=False)
        marker.write_text(AEGRA_VERSION)
    return venv


def _wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url} exited {proc.returncode} while starting:\n{_tail(log)}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url + "/", timeout=5) as answer:
                if answer.status == 200:
                    return
        time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer within {timeout_s:g} s:\n{_tail(log)}")


def _tail(log: Path) -> str:
    with contextlib.suppress(OSError):
        return log.read_text(errors="replace")[-3000:]
    return ""


@contextlib.contextmanager
def running_redis() -> Iterator[str]:
    """A throwaway ``redis-server`` on a free loopback port, no persistence; yields its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is missing: install Debian's `redis-server` package (`.ci/run` does)",
                    pytrace=False)
    port = free_port()
    root = Path(tempfile.mkdtemp(prefix="deep-agent-redis-"))
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail(f"redis-server did not start on port {port}", pytrace=False)
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        if proc.poll() is None:
            proc.kill()
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class AegraInstance:
    """One aegra API process; ``kill()`` SIGKILLs it (a crash), ``stop()`` ends it politely."""

    venv: Path
    env: dict[str, str]
    root: Path
    name: str
    port: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.root / f"{self.name}.log"

    def start(self) -> None:
        self.port = free_port()
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(self.venv / "bin" / "python"), "-m", "uvicorn", "aegra_api.main:app",
                 "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"],
                cwd=CHILD_DIR, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        _wait_http(self.url, self.proc, self.log, START_TIMEOUT_S)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def restart(self) -> None:
        """Start again after a kill (on a new port: read ``url`` again)."""
        self.kill()
        self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


@contextlib.contextmanager
def aegra_pair(cache_dir: Path, postgres: PostgresServer,
               env: Mapping[str, str] | None = None) -> Iterator[tuple[AegraInstance, AegraInstance]]:
    """Two aegra instances on a fresh database of ``postgres`` and one throwaway Redis.

    ``env``: more of aegra's settings, e.g. shorter worker leases
    (:data:`QUICK_RECOVERY`) for tests that kill an instance, or an
    ``AEGRA_CONFIG`` of other graphs, which may be the project's own
    (:mod:`deep_agent._server_graphs`: ``PYTHONPATH`` is the project's root).
    """
    venv = aegra_venv(cache_dir)
    database = postgres.create_database()
    root = Path(tempfile.mkdtemp(prefix="deep-agent-aegra-"))
    with running_redis() as redis_url:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "POSTGRES", "REDIS", "AEGRA"))}
        base.update(DATABASE_URL=database, REDIS_BROKER_ENABLED="true", REDIS_URL=redis_url,
                    AEGRA_CONFIG=str(CHILD_DIR / "aegra.json"), AUTH_TYPE="noop", LOG_LEVEL="WARNING",
                    CRON_ENABLED="false", OTEL_TARGETS="", AEGRA_CHILD_SECONDS="3", VIRTUAL_ENV=str(venv),
                    PATH=f"{venv / 'bin'}:{os.environ.get('PATH', '')}", PYTHONPATH=str(PROJECT_ROOT))
        settings = {**base, **(env or {})}
        a = AegraInstance(venv, {**settings, "RUN_MIGRATIONS_ON_STARTUP": "true"}, root, "a")
        b = AegraInstance(venv, {**settings, "RUN_MIGRATIONS_ON_STARTUP": "false"}, root, "b")
        try:
            a.start()
            b.start()
            yield a, b
        finally:
            for instance in (b, a):
                instance.stop()
            shutil.rmtree(root, ignore_errors=True)


PROJECT_GRAPHS = ("scripted_delegator", "scripted_worker", "graph")
"""The project's graphs the served pair serves (``deep_agent/_server_graphs.py``), beside the aegra child's."""


@pytest.fixture(scope="session")
def aegra_served_pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                      postgres_server: PostgresServer) -> Iterator[tuple[AegraInstance, AegraInstance]]:
    """One aegra pair for the session, serving the aegra child's graphs and the project's own.

    Shared by every aegra file (each test has threads of its own): a pair's start
    is two aegra processes importing and a Postgres database migrated, paid once.
    Its worker leases are short (:data:`QUICK_RECOVERY`) for the fault tests,
    which kill an instance (and start it again) or restart the session's Postgres.
    """
    config = tmp_path_factory.mktemp("aegra-config") / "aegra.json"
    child = json.loads((CHILD_DIR / "aegra.json").read_text())["graphs"]
    graphs = {name: str(CHILD_DIR / where) for name, where in child.items()}
    graphs.update({name: f"{PROJECT_ROOT / 'deep_agent' / '_server_graphs.py'}:{name}" for name in PROJECT_GRAPHS})
    config.write_text(json.dumps({"graphs": graphs}))
    settings = {**QUICK_RECOVERY, "AEGRA_CONFIG": str(config)}
    with aegra_pair(venv_folder(request, tmp_path_factory), postgres_server, settings) as pair:
        yield pair


if __name__ == "__main__":  # python -m helpers.aegra CACHE_DIR: the venv made ahead (.ci/run, beside ruff and mypy)
    import sys

    aegra_venv(Path(sys.argv[1]))
