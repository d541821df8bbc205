"""The ``deep-agent`` command line, run for real: its entry point, a run in a subprocess, a scripted project.

``SCRIPTS`` puts ``tests/helpers/scripted`` on the run's ``PYTHONPATH``, so a run can use
``--model scripted:cli_scripts:NAME`` (or ``cli_background_scripts``).
"""

from __future__ import annotations

import contextlib
import json
import locale
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from helpers import REPO as ROOT
from helpers import TESTS

SCRIPTS = {"PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS / "helpers" / "scripted")])}


def entry_point() -> list[str]:
    script = Path(sys.executable).parent / "deep-agent"
    if script.exists():
        return [str(script)]
    found = shutil.which("deep-agent")
    return [found] if found else [sys.executable, "-m", "deep_agent.cli._app"]


def home_beside(cwd: Path) -> Path:
    """The user's home for a test run in ``cwd``: a folder beside it, reached as ``cwd/home`` (a symlink).

    ``run`` refuses a workspace that holds the home folder, so the home is not
    inside the project; tests still write ``cwd / "home" / ...``.
    """
    home = cwd.parent / f"{cwd.name}.home"
    link = cwd / "home"
    if link.is_dir() and not link.is_symlink() and not home.exists():
        link.rename(home)  # made by the test before: moved beside the project
    home.mkdir(exist_ok=True)
    if not os.path.lexists(link):
        link.symlink_to(home, target_is_directory=True)
    return home


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess:
    """A ``deep-agent`` run in ``cwd``, a forked child (:func:`program`)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEEP_AGENT_"))}
    # The folder-trust record lives in the config directory: never the real user's.
    home = home_beside(cwd)
    base.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                 "COLUMNS": "200", "PYTHONPATH": str(ROOT)})
    base.update(env or {})
    return program(*args, cwd=cwd, env=base, stdin=stdin)


_fork_server: subprocess.Popen[bytes] | None = None


def program(*args: str, cwd: Path, env: dict[str, str], stdin: str = "",
            timeout: float = 180) -> subprocess.CompletedProcess:
    """``subprocess.run([*entry_point(), *args], ...)`` with ``capture_output`` and ``text``, in ``env`` alone,
    as a child of :mod:`helpers.cli_forks`.

    The child is a process of its own, with these arguments, environment,
    folder and streams (files, read back as ``subprocess.run`` would decode
    them), and exits as the program does; only the imports are done once
    per test worker, before the fork (1.4 s of a run's 2.1 s of CPU).
    """
    with started(*args, cwd=cwd, env=env, stdin=stdin) as (_, ended):
        return ended(timeout)


@contextlib.contextmanager
def started(*args: str, cwd: Path, env: dict[str, str], stdin: str = "") -> Iterator[
        tuple[int, Callable[[float], subprocess.CompletedProcess]]]:
    """:func:`program`'s child while it runs: its pid (to signal it) and ``ended(timeout)``, which waits for it
    and returns what :func:`program` does. A child still running when the block ends is killed."""
    global _fork_server
    if _fork_server is None or _fork_server.poll() is not None:
        # The interpreter's start-up settings (PYTHON*) as a run would have them; -P: neither this folder nor
        # the current one on its path, as for the deep-agent script.
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEEP_AGENT_"))}
        _fork_server = subprocess.Popen(
            [sys.executable, "-P", str(TESTS / "helpers" / "cli_forks.py"), entry_point()[0], SCRIPTS["PYTHONPATH"]],
            cwd=ROOT, bufsize=0,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**clean, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})
        assert _fork_server.stdout is not None and _fork_server.stdout.readline() == b"ready\n", "cli_forks failed"
    argv = [*entry_point(), *args]
    server, answers = _fork_server, _fork_server.stdout
    assert server.stdin is not None and answers is not None
    with tempfile.TemporaryDirectory(prefix="deep-agent-run-") as folder:
        streams = {name: Path(folder) / name for name in ("stdin", "stdout", "stderr")}
        streams["stdin"].write_text(stdin)
        streams["stdout"].touch()
        streams["stderr"].touch()
        request = {"argv": argv, "env": env, "cwd": str(cwd), **{name: str(path) for name, path in streams.items()}}
        server.stdin.write(json.dumps(request).encode() + b"\n")
        pid = int(answers.readline().split()[1])
        status: list[int] = []

        def ended(timeout: float) -> subprocess.CompletedProcess:
            if not select.select([answers], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(argv, timeout)
            status.append(int(answers.readline().split()[1]))

            def read(name: str) -> str:  # as subprocess.run(text=True) decodes: the locale's encoding, \r\n as \n
                text = streams[name].read_bytes().decode(locale.getpreferredencoding(False))
                return text.replace("\r\n", "\n").replace("\r", "\n")

            return subprocess.CompletedProcess(argv, status[0], read("stdout"), read("stderr"))

        try:
            yield pid, ended
        finally:
            if not status:
                os.kill(pid, signal.SIGKILL)
                answers.readline()


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r")


EDITOR = """---
name: editor
description: Edits files of the project on request.
model: sonnet
tools: Read, Grep, Edit
color: cyan
---
You edit files. Make the smallest change that does what was asked.
"""


SURVEYOR = """---
name: surveyor
description: Surveys the project; slow, best in the background.
model: haiku
tools: Read, Grep, Glob, WebFetch
---
You survey the project and report what you find.
"""


def make_project(root: Path) -> Path:
    agents = root / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "editor.md").write_text(EDITOR, encoding="utf-8")
    (agents / "surveyor.md").write_text(SURVEYOR, encoding="utf-8")
    (root / "notes.txt").write_text("These are teh notes of the project.\n", encoding="utf-8")
    home_beside(root)
    return root


def terminal_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEEP_AGENT_"))}
    home = home_beside(root)
    env.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "TERM": "xterm-256color",
                "COLUMNS": "200", "LINES": "60",
                "PYTHONPATH": SCRIPTS["PYTHONPATH"]})
    return env
