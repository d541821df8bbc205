"""What a command of a git config imports from the working tree's top is out of ``Bash``'s reach.

Git runs the commands of its config from the working tree's top (a clean
filter, a textconv, an alias...), and ``python -m nbstripout`` puts its cwd
first on the import path: before, a command wrote ``nbstripout.py`` (or a
``json/`` package, for ``python3 -m json.tool``) there, and the user's next
``git status`` or ``git diff`` ran it on the host. Whichever key holds the
command, in the repository's config or the user's own.
"""

from __future__ import annotations

import subprocess

from deep_agent.tools._protected import Protected

RUNS_A_COMMAND = [  # every key whose value git runs; each imports a module of its own name
    "filter.nb.clean", "filter.nb.smudge", "filter.nb.process", "diff.nb.textconv", "diff.nb.command",
    "diff.external", "merge.nb.driver", "core.fsmonitor", "core.pager", "pager.log", "core.editor",
    "sequence.editor", "core.sshCommand", "core.askPass", "interactive.diffFilter", "alias.st",
    "credential.helper", "gpg.program", "gpg.ssh.defaultKeyCommand",
]


def module(key: str) -> str:
    return key.replace(".", "_").lower()


def test_no_module_a_config_command_imports_is_made_or_replaced(runner, tmp_path, monkeypatch):
    ws = runner.ws
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    user = tmp_path / "gitconfig"  # the user's own config: read as their git reads it for this repository
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(user))
    for n, key in enumerate(RUNS_A_COMMAND):
        command = f"{'!' if key.split('.')[0] in ('alias', 'credential') else ''}python3 -m {module(key)} --x"
        subprocess.run(["git", "config", "--file", str(user if n % 2 else ws / ".git" / "config"), key, command],
                       check=True)
    subprocess.run(["git", "config", "--file", str(ws / ".git" / "config"), "diff.json.textconv", "python3 -m json.tool"],
                   check=True)
    (ws / "filter_nb_clean.py").write_text("print('strip')\n")
    runner.chown(ws)
    names = ["json", *map(module, RUNS_A_COMMAND)]
    plant = "; ".join(f"echo 'import os' > {n}.py; mkdir -p {n} && echo 'import os' > {n}/__main__.py" for n in names)
    out = runner.run(f"{plant}; echo evil > made.py && mv -f made.py filter_nb_clean.py; echo done",
                     protected=Protected.of(ws))
    assert "done" in out, out
    assert (ws / "filter_nb_clean.py").read_text() == "print('strip')\n", out
    for name in names:
        for planted in (ws / f"{name}.py", ws / name / "__main__.py"):
            assert not planted.exists() or "import os" not in planted.read_text(), (planted, out)
