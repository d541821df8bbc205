"""What the host's tools read from the workspace is protected whatever shape its name has and wherever it is said.

Found by a review, each one run on the host by the user's next ``git status``, ``hg status``, ``git commit`` or ``cd``:
a bare file name an include or an hg hook names (``local.inc``, ``python:hghook.py:run``, an extension), a folder a
``.pth`` import line puts on the path (in the workspace's environment, the user's site, an environment on ``PATH``),
the ``node_modules`` beside a script node runs, a file any command of an ``.envrc`` names (``eval "$(cat x)"``),
an environment value naming a file (``PYTHONSTARTUP=startup.py``), and what the environment of an interpreter named
from the command's folder (``.venv/bin/python``) installs, when this program started elsewhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from deep_agent.tools import _host_code as host_code
from deep_agent.tools._protected import Protected

HOOK = ".git/hooks/pre-commit"
SITE = "lib/python3.11/site-packages"

ROUTES = [  # (git config, files (<WS>: the workspace), what a command plants)
    ({"include.path": "../gitconfig"}, {"gitconfig": "[include]\n\tpath = local.inc\n"}, "local.inc"),
    ({}, {".hg/hgrc": "%include ../hgrc.shared\n", "hgrc.shared": "%include local.rc\n"}, "local.rc"),
    ({}, {".hg/hgrc": "[hooks]\npre-status = python:hghook.py:run\n"}, "hghook.py"),
    ({}, {".hg/hgrc": "[extensions]\nrtext = rtext.py\n"}, "rtext.py"),
    ({}, {HOOK: "#!/bin/sh\nnode tools/fmt.js\n", "tools/fmt.js": "require('leftpad')\n"},
     "tools/node_modules/leftpad/index.js"),
    ({}, {".venv/pyvenv.cfg": "home = /usr/bin\n", "tools/a.py": "x\n",
          f".venv/{SITE}/rt.pth": "import sys; sys.path.insert(0, '<WS>/tools')\n"}, "tools/sitecustomize.py"),
    ({}, {".envrc": 'eval "$(cat .envrc.local 2>/dev/null)"\n'}, ".envrc.local"),
    ({}, {HOOK: "#!/bin/sh\nPYTHONSTARTUP=startup.py python3 -i </dev/null\n"}, "startup.py"),
    ({}, {"HOME/.local/" + SITE + "/__editable__.p.pth": "<WS>/src\n", HOOK: "#!/bin/sh\npython3 -c pass\n",
          "src/a.py": "x\n"}, "src/usercustomize.py"),
    ({}, {HOOK: '#!/bin/sh\n.venv/bin/python -c "import zzrtpkg"\n', ".venv/pyvenv.cfg": "home = /usr/bin\n",
          f".venv/{SITE}/zzrtpkg/__init__.py": "x\n", ".venv/bin/python": "-> <PYTHON>"}, "zzrtpkg.py"),
]


@pytest.mark.parametrize(("config", "files", "planted"), ROUTES, ids=[r[2] + f"-{n}" for n, r in enumerate(ROUTES)])
def test_what_the_host_reads_cannot_be_planted(runner, tmp_path, monkeypatch, config, files, planted):
    ws = runner.ws
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # this program started elsewhere: a relative interpreter is the command's
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    for key, value in config.items():
        subprocess.run(["git", "config", "--file", str(ws / ".git" / "config"), key, value], check=True)
    for name, text in files.items():
        path = tmp_path / name.removeprefix("HOME/") if name.startswith("HOME/") else ws / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = text.replace("<WS>", str(ws)).replace("<PYTHON>", sys.executable)
        if text.startswith("-> "):
            path.symlink_to(text[3:])
        else:
            path.write_text(text)
    runner.chown(ws)
    protected = Protected.of(ws)
    assert protected.why(ws / planted) is not None, planted
    out = runner.run(f"mkdir -p {(ws / planted).parent}; printf evil > {planted}; echo done", protected=protected)
    assert "done" in out, out
    assert not (ws / planted).is_file() or (ws / planted).read_text() != "evil", out


def test_a_config_value_that_is_no_path_makes_no_placeholder(runner):
    """A value's word with a suffix is a path only where the key takes one: an email is not a file to hold."""
    ws = runner.ws
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    subprocess.run(["git", "config", "--file", str(ws / ".git" / "config"), "user.email", "me@example.com"],
                   check=True)
    (ws / ".hg").mkdir()
    (ws / ".hg" / "hgrc").write_text("[ui]\nusername = me@example.org\n")
    runner.chown(ws)
    protected = Protected.of(ws)
    assert protected.why(ws / "me@example.com") is None and protected.why(ws / "me@example.org") is None
    assert not os.path.lexists(Path(ws / "me@example.com"))


@pytest.mark.parametrize(("name", "text"), [
    (".envrc", "dotenv a\0b\n"),
    ("venv/pyvenv.cfg", "home = /usr/\0bin\n"),
    (".hg/hgrc", "%include a\0b\n"),
    ("sub/.git", "gitdir: a\0b\n"),
])
def test_a_nul_in_what_the_checkout_names_stops_no_command(runner, name, text):
    """A NUL in a path a checkout's file names raised out of the protected set's walk, and no command ran (a
    checkout's content stopping every Bash command); it names no path, so nothing is held for it."""
    ws = runner.ws
    (ws / name).parent.mkdir(parents=True, exist_ok=True)
    (ws / name).write_text(text)
    (ws / "venv" / "bin").mkdir(parents=True, exist_ok=True)
    runner.chown(ws)
    out = runner.run("echo done", protected=Protected.of(ws))
    assert out.strip().endswith("done"), out


def test_a_script_sourced_on_every_line_is_read_once(runner, monkeypatch):
    """An ``.envrc`` sourcing one long script on each of its lines had it parsed again for every line (a checkout
    that stalled each command's start for minutes); a script is read once a reading, however often it is sourced."""
    ws = runner.ws
    (ws / ".envrc").write_text(". ./b.sh\n" * 40)
    (ws / "b.sh").write_text("echo x\n" * 300)
    runner.chown(ws)
    reads: list[Path] = []
    real = host_code.read_regular
    monkeypatch.setattr(host_code, "read_regular", lambda path, limit: reads.append(path) or real(path, limit))
    assert Protected.of(ws).why(ws / "b.sh") is not None
    # Once a pass: what it names, what it runs, and direnv's own reading of what it loads.
    assert reads.count(ws / "b.sh") <= 3, reads.count(ws / "b.sh")
