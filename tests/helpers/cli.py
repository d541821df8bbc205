"""The ``deep-agent`` command line, run for real: its entry point, a run in a subprocess, a scripted project.

``SCRIPTS`` puts ``tests/helpers/scripted`` on the run's ``PYTHONPATH``, so a run can use
``--model scripted:cli_scripts:NAME`` (or ``cli_background_scripts``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import REPO as ROOT
from helpers import TESTS

SCRIPTS = {"PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS / "helpers" / "scripted")])}


def entry_point() -> list[str]:
    script = Path(sys.executable).parent / "deep-agent"
    if script.exists():
        return [str(script)]
    found = shutil.which("deep-agent")
    return [found] if found else [sys.executable, "-m", "deep_agent.cli.app"]


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEEP_AGENT_"))}
    # The folder-trust record lives in the config directory: never the real user's.
    base.update({"HOME": str(cwd / "home"), "XDG_CONFIG_HOME": str(cwd / "home" / ".config"),
                 "COLUMNS": "200", "PYTHONPATH": str(ROOT)})
    base.update(env or {})
    return subprocess.run([*entry_point(), *args], cwd=cwd, env=base, capture_output=True, text=True,
                          input=stdin, timeout=180)


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
    (root / "home").mkdir()
    return root


def terminal_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEEP_AGENT_"))}
    env.update({"HOME": str(root / "home"), "XDG_CONFIG_HOME": str(root / "home" / ".config"), "TERM": "xterm-256color", "COLUMNS": "200", "LINES": "60",
                "PYTHONPATH": SCRIPTS["PYTHONPATH"]})
    return env
