"""Every in-process writer refuses the run's protected set, naming the path and why.

Before: ``Write(".git/hooks/pre-commit")`` and ``Edit(".git/config")``
succeeded, though the sandboxed ``Bash`` could not touch them. The check is
in one place (:func:`deep_agent.tools._workspace.open_regular`, which every
write goes through); this test enumerates the built-in tools that write and
fails when a new one is added without a row here.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

from deep_agent.tools import RISKY_TOOLS, Workspace, builtin_tools
from deep_agent.tools._protected import Protected

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
    return Workspace(tmp_path, protected=Protected.of(tmp_path, state_dir="state"))


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
                                  "State/threads.db", "bare/head"])
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


def test_the_command_lines_workspace_protects_its_state_folder(tmp_path, monkeypatch):
    import argparse

    from deep_agent.cli._run import workspace_of

    monkeypatch.chdir(tmp_path)
    args = argparse.Namespace(workspace=tmp_path, allow_home_workspace=False)
    ws = workspace_of(args, tmp_path / "state")
    write = {t.name: t for t in builtin_tools(ws, bash=None)}["Write"]
    assert "the state folder" in write.invoke({"file_path": "state/threads.db", "content": "planted"})
    assert not (tmp_path / "state").exists()


def test_the_trust_record_is_protected_when_the_config_folder_is_in_the_workspace(tmp_path, monkeypatch):
    # Before: with XDG_CONFIG_HOME inside the workspace, Write could add the folder to
    # trusted-folders.json, and the next run loaded its hooks without asking.
    import argparse

    from deep_agent.cli._run import workspace_of

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    ws = workspace_of(argparse.Namespace(workspace=tmp_path, allow_home_workspace=False), tmp_path / "state")
    write = {t.name: t for t in builtin_tools(ws, bash=None)}["Write"]
    answer = write.invoke({"file_path": ".config/deep-agent/trusted-folders.json", "content": "{}"})
    assert "protected" in answer, answer


def test_agents_and_skills_folders_named_on_the_command_line_are_protected(tmp_path, monkeypatch):
    import argparse

    from deep_agent.cli._run import workspace_of

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

    from deep_agent.cli._run import workspace_of

    sub = tmp_path / "sub"
    (sub / ".claude" / "agents").mkdir(parents=True)
    monkeypatch.chdir(sub)
    args = argparse.Namespace(workspace=str(tmp_path), allow_home_workspace=False)
    write = {t.name: t for t in builtin_tools(workspace_of(args, sub / "state"), bash=None)}["Write"]
    for path in ("sub/.claude/agents/evil.md", "sub/.mcp.json", "sub/.agents/agents/x.md"):
        assert "agent, skill, hook or MCP files" in write.invoke({"file_path": path, "content": "planted"})
        assert not (tmp_path / path).exists()


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
