"""A real PostgreSQL server for the Postgres tests, started once per session.

What this server needs to be a reliable test fixture:

* the server binaries of Debian's ``postgresql`` package (``initdb``,
  ``pg_ctl``, ``postgres``; under ``/usr/lib/postgresql/<version>/bin`` or on
  ``PATH``). ``.ci/run`` installs the package when it is missing. Without
  them the tests fail with a message saying so, they never skip;
* a non-root user: ``initdb`` and ``postgres`` refuse to run as root, so a
  root test run (CI) runs them as the package's ``postgres`` system user
  through ``runuser``; the cluster lives in a fresh temporary folder owned by
  the user that runs the server;
* trust authentication on loopback only (``listen_addresses=127.0.0.1``, a
  free port, the Unix socket in the cluster's own folder), so nothing
  outside this machine can reach it and no password is needed;
* ``fsync=off``: nothing here has to survive a power cut, and it is fast;
* a stop at the end of the session, even when a test fails.

Each test gets a database of its own (``postgres_url``), so tests never see
each other's threads. ``tests/conftest.py`` registers the fixtures; a test asks for one by name::

    def test_x(postgres_url):
        url = postgres_url   # "postgresql://deep_agent@127.0.0.1:<port>/t_<hex>"
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bench.dev_server import free_port
from helpers import REPO

SUPERUSER = "deep_agent"
SERVER_USER = "postgres"  # the system user Debian's package creates
START_TIMEOUT_S = 60
INSTALL_HINT = (
    "install Debian's `postgresql` package (apt-get install postgresql), which `.ci/run` "
    "does when it is missing"
)


class PostgresUnavailable(RuntimeError):
    """The test server could not be started; the message says why and what to do."""


def find_bin_dir() -> Path:
    """The folder holding ``initdb`` and ``pg_ctl``: the newest Debian version, else ``PATH``."""
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                    key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if debian:
        return Path(debian[-1]).parent
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    raise PostgresUnavailable(f"PostgreSQL server binaries (initdb, pg_ctl) not found: {INSTALL_HINT}")


def _as_server_user() -> tuple[list[str], int | None, int | None]:
    """The command prefix, uid and gid to run the server with: ourselves, or ``postgres`` as root."""
    if os.geteuid() != 0:
        return [], None, None
    try:
        entry = pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise PostgresUnavailable(
            f"running as root, and there is no {SERVER_USER!r} system user to run the test server "
            f"as (postgres refuses to run as root): {INSTALL_HINT}"
        ) from None
    runuser = shutil.which("runuser")
    if runuser is None:
        raise PostgresUnavailable("running as root and `runuser` (util-linux) is missing: "
                                  "cannot start postgres as an unprivileged user")
    return [runuser, "-u", SERVER_USER, "--"], entry.pw_uid, entry.pw_gid


@dataclass
class PostgresServer:
    """A running throwaway server: ``url(db)`` for a database on it, ``create_database()`` for a new one."""

    port: int
    root: Path
    cluster: _Cluster | None = field(default=None, repr=False, compare=False)

    def restart(self, down_s: float = 2.0) -> None:
        """Crash the server and start it again on the same port after ``down_s`` (the faults' tests)."""
        if self.cluster is None:
            raise RuntimeError("this PostgresServer was not started here: it cannot be restarted")
        self.cluster.restart(self.port, down_s)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


class _Cluster:
    """One ``initdb`` cluster in a temporary folder, run by an unprivileged user."""

    def __init__(self) -> None:
        self.bin = find_bin_dir()
        self.prefix, uid, gid = _as_server_user()
        # As root, under /tmp: the server user must reach the folder, and TMPDIR may be private.
        self.root = Path(tempfile.mkdtemp(prefix="deep-agent-pg-", dir="/tmp" if uid is not None else None))
        if uid is not None:
            os.chown(self.root, uid, gid)
        self.data, self.log = self.root / "data", self.root / "server.log"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        self.env.update(LC_ALL="C", LANG="C")
        self.started = False

    def _run(self, *command: str, timeout: float = START_TIMEOUT_S) -> subprocess.CompletedProcess:
        return subprocess.run([*self.prefix, *command], env=self.env, cwd=self.root, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def init(self) -> None:
        done = self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", SUPERUSER,
                         "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync")
        if done.returncode != 0:
            raise PostgresUnavailable(f"initdb failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")

    def start(self, port: int | None = None) -> int:
        """Start on ``port``, or a free loopback port (a few tries: a port can be taken between pick and bind)."""
        failure = ""
        fixed = port
        for _ in range(3 if fixed is None else 1):
            port = free_port() if fixed is None else fixed
            options = (f"-p {port} -k {self.root} -c listen_addresses=127.0.0.1 "
                       "-c fsync=off -c full_page_writes=off -c synchronous_commit=off")
            done = self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                             "-w", "-t", str(START_TIMEOUT_S), "-o", options, "start",
                             timeout=START_TIMEOUT_S + 10)
            if done.returncode == 0:
                self.started = True
                return port
            failure = f"{done.stdout}{done.stderr}\n{self._log_tail()}"
        raise PostgresUnavailable(f"pg_ctl start failed:\n{failure}")

    def restart(self, port: int, down_s: float) -> None:
        """Crash the server (immediate stop: no clean shutdown), keep it down ``down_s``, start it on ``port``."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "-t", "30", "stop",
                  timeout=40)
        time.sleep(down_s)
        self.start(port)

    def stop(self) -> None:
        """Stop the server (fast shutdown, then immediate) and remove the cluster; never raises."""
        if self.started:
            for mode in ("fast", "immediate"):
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    done = self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w",
                                     "-t", "30", "stop", timeout=40)
                    if done.returncode == 0:
                        break
        shutil.rmtree(self.root, ignore_errors=True)

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-3000:]
        return ""


@contextlib.contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    """Start a throwaway server, yield it, always stop it. Raises :class:`PostgresUnavailable`."""
    cluster = _Cluster()
    try:
        cluster.init()
        port = cluster.start()
        yield PostgresServer(port=port, root=cluster.root, cluster=cluster)
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server on a free loopback port for this test session; fails (not skips) if it cannot start."""
    stack = contextlib.ExitStack()
    try:
        server = stack.enter_context(running_postgres())
    except PostgresUnavailable as exc:
        failure = str(exc)
    else:
        failure = None
    if failure is not None:
        pytest.fail(f"cannot start the PostgreSQL test server: {failure}", pytrace=False)
    with stack:
        yield server


@pytest.fixture()
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of a fresh database of its own for one test."""
    return postgres_server.create_database()


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The CLI through its installed entry point (a forked child: :func:`helpers.cli.program`), offline on the
    scripted model."""
    from helpers.cli import program

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEEP_AGENT_"))}
    home = cwd.parent / f"{cwd.name}.home"  # beside: run refuses a workspace that is the home folder
    home.mkdir(exist_ok=True)
    env.update({"HOME": str(home), "COLUMNS": "200", "PYTHONPATH": str(REPO), "DEEP_AGENT_SCRIPTED": "1"})
    return program(*args, cwd=cwd, env=env)


def rows(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    agents = tmp_path / "project" / ".agents" / "agents"
    agents.mkdir(parents=True)
    (agents / "researcher.md").write_text(
        "---\nname: researcher\ndescription: Researches one topic.\nmax_turns: 4\n---\n"
        "Research the topic and answer in one line.\n",
        encoding="utf-8",
    )
    return tmp_path / "project"
