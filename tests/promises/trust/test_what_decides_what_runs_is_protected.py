"""Every file that decides what runs later, or where keys go, is out of the agent's reach.

* The CLI's own inputs: the scripts a trusted hook or MCP server names (what
  the trust fingerprint hashes), ``--model-profiles`` and ``--prices``.
  Before, a trusted guard's ``./hooks/no-rm.sh`` was rewritten to ``exit 0``,
  a server's script handed on its declared secret, and a profile's
  ``base_url`` sent the next run's provider key elsewhere. Your own agent
  files' (``~/.claude/agents``) hooks too: they start in the folder as well.
* Another version control's metadata: ``.hg/hgrc`` runs ``[hooks]`` on the
  next ``hg status``; a ``.hg``, ``.jj`` or ``.sl`` a command makes is set
  aside like a new ``.git``.
* Every virtual environment of the workspace, active or not: a ``.pth`` runs
  at its python's next start.
* What a conditional include names, whatever its condition now
  (``onbranch:`` holds after the next ``git switch``).
* Beside the workspace, only the interpreter's and ``PATH``'s environments
  stay visible when they sit in its parent, not ``../.env``.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from helpers.cli import TESTS

from deep_agent.tools import builtin_tools
from deep_agent.tools._protected import Protected

AGENT = """---
name: coder
description: Writes code.
tools: Read
hooks:
  PreToolUse:
    - matcher: Bash
      hooks:
        - {type: command, command: ./hooks/no-rm.sh}
mcp_config:
  calc:
    command: python3
    args: [calc_server.py]
    env: {SERVICE_TOKEN: "${SERVICE_TOKEN}"}
---
Work.
"""


def test_what_a_trusted_hook_or_server_runs_and_the_runs_own_files_are_protected(tmp_path, monkeypatch):
    import deep_agent.cli._run as run
    from deep_agent.cli._app import parse

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.syspath_prepend(str(TESTS / "helpers" / "scripted"))
    (tmp_path / ".claude" / "agents").mkdir(parents=True)
    (tmp_path / ".claude" / "agents" / "coder.md").write_text(AGENT)
    (tmp_path / "hooks").mkdir()
    for name, text in {"hooks/no-rm.sh": "#!/bin/sh\nexit 0\n", "calc_server.py": "", "profiles.yaml": "{}\n",
                       "prices.yaml": "{}\n"}.items():
        (tmp_path / name).write_text(text)
    made = []

    def workspace_of(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    real = run.workspace_of
    monkeypatch.setattr(run, "workspace_of", workspace_of)
    run.prepare_run(parse(["run", "go", "--model", "scripted:cli_scripts:one_edit", "--trust-folder", "--unsafe-bash",
                           "--model-profiles", "profiles.yaml", "--prices", "prices.yaml"]))
    write = {t.name: t for t in builtin_tools(made[0], bash=None)}["Write"]
    for name in ("hooks/no-rm.sh", "calc_server.py", "profiles.yaml", "prices.yaml"):
        assert "protected" in write.invoke({"file_path": name, "content": "planted"}), name
        assert "planted" not in (tmp_path / name).read_text(), name


def test_what_your_own_agent_files_hooks_run_from_the_folder_is_protected(tmp_path, monkeypatch):
    import deep_agent.cli._run as run
    from deep_agent.cli._app import parse

    home, folder = tmp_path / "home", tmp_path / "project"
    (home / ".claude" / "agents").mkdir(parents=True)
    (home / ".claude" / "agents" / "coder.md").write_text(AGENT)  # yours: no trust asked, its hooks run here
    (folder / "hooks").mkdir(parents=True)
    (folder / "hooks" / "no-rm.sh").write_text("#!/bin/sh\nexit 2\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(TESTS / "helpers" / "scripted"))
    made = []
    real = run.workspace_of
    monkeypatch.setattr(run, "workspace_of", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    run.prepare_run(parse(["run", "go", "--model", "scripted:cli_scripts:one_edit", "--unsafe-bash"]))
    write = {t.name: t for t in builtin_tools(made[0], bash=None)}["Write"]
    for name in ("hooks/no-rm.sh", "calc_server.py"):  # the guard's script, and a server's missing yet
        assert "protected" in write.invoke({"file_path": name, "content": "exit 0"}), name
    assert (folder / "hooks" / "no-rm.sh").read_text() == "#!/bin/sh\nexit 2\n"


def test_another_version_controls_config_is_protected_and_a_new_repository_set_aside(runner):
    ws = runner.ws
    (ws / ".hg").mkdir()
    (ws / ".hg" / "hgrc").write_text("[ui]\n")
    runner.chown(ws)
    protected = Protected.of(ws)
    assert protected.why(ws / ".hg" / "hgrc") and protected.why(ws / "sub" / ".jj" / "config.toml")
    out = runner.run("echo '[hooks]' >> .hg/hgrc; mkdir -p a/.hg b/.jj c/.sl && echo '[hooks]' > a/.hg/hgrc; echo ok",
                     protected=protected)
    assert "ok" in out and (ws / ".hg" / "hgrc").read_text() == "[ui]\n", out
    for made in ("a/.hg", "b/.jj", "c/.sl"):
        assert not (ws / made).exists() and (ws / f"{made}.made-by-agent").is_dir(), (made, out)


def test_a_virtual_environment_not_on_path_is_protected(runner):
    ws = runner.ws
    site = ws / "env" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (ws / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (ws / "env" / "bin").mkdir()
    (ws / "env" / "bin" / "activate").write_text("# activate\n")
    runner.chown(ws)
    protected = Protected.of(ws)
    assert protected.why(ws / "env" / "bin" / "activate")
    out = runner.run(f"echo 'import os' > {site.relative_to(ws)}/zz.pth; echo done", protected=protected)
    assert "done" in out and not (site / "zz.pth").exists(), out


def test_what_a_conditional_include_names_is_protected_whatever_its_condition(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "feature.gitconfig").write_text("[core]\n\tfsmonitor = scripts/fsmon.sh\n")
    subprocess.run(["git", "-C", str(tmp_path), "config", "includeIf.onbranch:feature/**.path",
                    "../tools/feature.gitconfig"], check=True)
    assert Protected.of(tmp_path).why(tmp_path.resolve() / "scripts" / "fsmon.sh")


def test_beside_the_workspace_only_the_environment_on_path_stays_visible(runner, monkeypatch):
    # The parent must be a folder no rule hides anyway (not /tmp, not a home).
    try:
        parent = Path(tempfile.mkdtemp(prefix="sandbox-parent-", dir="/srv"))
    except OSError:
        pytest.skip("no folder outside /tmp and the homes to make the workspace's parent in")
    try:
        parent.chmod(0o755)
        (parent / ".env").write_text("DATABASE_URL=the-neighbours-secret\n")
        (parent / ".venv" / "bin").mkdir(parents=True)
        (parent / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
        (parent / ".venv" / "bin" / "tool").write_text("#!/bin/sh\necho tool-ran\n")
        (parent / ".venv" / "bin" / "tool").chmod(0o755)
        ws = parent / "backend"
        ws.mkdir()
        runner.chown(ws)
        runner.ws = ws
        monkeypatch.setenv("PATH", f"{parent / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}")
        out = runner.run("cat ../.env; tool")
        assert "the-neighbours-secret" not in out and "tool-ran" in out, out
    finally:
        import shutil

        shutil.rmtree(parent, ignore_errors=True)
