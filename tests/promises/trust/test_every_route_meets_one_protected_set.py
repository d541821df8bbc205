"""Every route that writes meets the same protected set: sandboxed ``Bash``, ``Write``, ``Edit``, and the
making of a repository (``.git`` or bare, the workspace itself included).

The set is built by rules, not lists, and this test enumerates routes x classes:

* a git directory is what git itself takes for one (``HEAD`` with ``objects``
  and ``refs``, ``refs`` a file in reftable setups, or a ``commondir``);
  git's own ``rev-parse`` is the judge of what a route made;
* every word of every git config git reads there (the host user's global
  one, the repository's, what it includes, a bare repository's, the
  enclosing repository's) that names a path in the workspace, with no list
  of keys;
* the scripts a hook runs, and the files they source in turn.

Before: a bare repository whose ``refs`` is a file, a ``HEAD`` + ``commondir``
folder and the workspace itself were no git directories; only a list of keys
was read, so ``alias.x = !sh tools/alias.sh`` or a global ``core.pager`` left
their scripts writable; a file a hook's script sources was writable; Write
could assemble a bare repository file by file.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tempfile
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec
from importlib.util import spec_from_file_location
from pathlib import Path
from types import SimpleNamespace

import pytest

from deep_agent.tools import Workspace, builtin_tools
from deep_agent.tools.host_code import files_run_by
from deep_agent.tools.protected import Protected
from deep_agent.tools.sandbox import SET_ASIDE
from subagents.settings import DelegationSettings

GIT = "a git directory"
CONFIG = "a path a git config names"
SCRIPT = "a script a trusted hook or MCP server runs"
TARGETS = {
    ".git/config": GIT,
    ".git/hooks/pre-commit": GIT,  # missing: cannot be created either
    "nested/.git/config": GIT,
    "bare/config": GIT,  # git init --bare
    "reftable/config": GIT,  # HEAD, objects/ and a refs file
    "linked/commondir": GIT,  # HEAD and a commondir: git reads the common folder's config
    "tools/alias.sh": CONFIG,  # the repository's alias.x = !sh tools/alias.sh
    "tools/top.sh": CONFIG,  # its alias.top = !sh "$(git rev-parse --show-toplevel)/tools/top.sh"
    "shared.gitconfig": CONFIG,  # its include.path
    "tools/helper.sh": CONFIG,  # a command the included file names
    "hooks/pre-commit": CONFIG,  # its core.hooksPath = hooks: one bare word, a folder
    "tools/pager.sh": CONFIG,  # the user's global core.pager = sh tools/pager.sh
    "tools/bare.sh": CONFIG,  # the bare repository's core.editor
    ".githooks/pre-commit": CONFIG,  # the global core.hooksPath = .githooks, missing: held while a command runs
    "scripts/guard.sh": SCRIPT,  # a hook runs sh scripts/guard.sh
    "scripts/lib.sh": SCRIPT,  # which sources "$(dirname "$0")/lib.sh"
    ".claude/agents/x.md": "agent, skill, hook or MCP files",
    "state/threads.db": "the state folder",
}


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def config(file: Path, key: str, value: str) -> None:
    """Set ``key`` in a config file (by name: as root, git refuses a repository another user owns)."""
    git("config", "--file", str(file), key, value, cwd=file.parent)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture()
def home(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The host user's home, with their global git config (read by the user's next git, so protected too)."""
    made = Path(tempfile.mkdtemp(prefix="sandbox-home-"))
    monkeypatch.setenv("HOME", str(made))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    for name in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM"):
        monkeypatch.delenv(name, raising=False)
    write(made / ".gitconfig", "[core]\n\tpager = sh tools/pager.sh\n\thooksPath = .githooks\n")
    return made


def checkout(ws: Path) -> Protected:
    """Each class of :data:`TARGETS` in ``ws``, and the run's protected set of it."""
    git("init", "-q", ".", cwd=ws)
    config(ws / ".git" / "config", "alias.x", "!sh tools/alias.sh")
    config(ws / ".git" / "config", "alias.top", '!sh "$(git rev-parse --show-toplevel)/tools/top.sh"')
    config(ws / ".git" / "config", "include.path", "../shared.gitconfig")
    write(ws / "shared.gitconfig", '[credential]\n\thelper = "!sh tools/helper.sh"\n[core]\n\thooksPath = hooks\n'
                                   '[alias]\n\tgone = !git branch --merged | grep -v work\n')
    write(ws / "work" / "notes.txt", "a folder a command's argument names is work, not code\n")
    git("init", "-q", "nested", cwd=ws)
    git("init", "-q", "--bare", "bare", cwd=ws)
    config(ws / "bare" / "config", "core.editor", "sh tools/bare.sh")
    write(ws / "reftable" / "HEAD", "ref: refs/heads/main\n")
    (ws / "reftable" / "objects").mkdir()
    write(ws / "reftable" / "refs", "this repository uses the reftable format\n")
    write(ws / "linked" / "HEAD", "ref: refs/heads/main\n")
    write(ws / "linked" / "commondir", "../bare\n")
    write(ws / "scripts" / "guard.sh", '. "$(dirname "$0")/lib.sh"\ncheck\n')
    for path in TARGETS:
        if not (ws / path).exists() and path not in (".git/hooks/pre-commit", ".githooks/pre-commit"):
            write(ws / path, "original\n")
    hook = {"PreToolUse": [{"hooks": [{"type": "command", "command": "sh scripts/guard.sh"}]}]}
    scripts = files_run_by(SimpleNamespace(hooks=hook, mcp_config=None), ws)
    assert scripts == [ws.resolve() / "scripts/guard.sh", ws.resolve() / "scripts/lib.sh"]
    return Protected.of(ws, state_dir="state", extra=scripts)


def every_route_is_refused(runner, protected: Protected, targets: dict[str, str]) -> None:
    """Write, Edit and a sandboxed command each try every target: each is refused, naming why; nothing changes."""
    ws = runner.ws
    before = {p: (ws / p).read_bytes() if (ws / p).exists() else None for p in targets}
    tools = {t.name: t for t in builtin_tools(Workspace(ws, protected=protected), bash=None)}
    for path, why in targets.items():
        answers = [tools["Write"].invoke({"file_path": path, "content": "planted"})]
        if before[path]:
            answers.append(tools["Edit"].invoke({"file_path": path, "old_string": before[path].decode(),
                                                 "new_string": "planted"}))
        for answer in answers:
            assert "protected" in answer and why in answer, (path, answer)
    runner.chown(ws)
    out = runner.run("; ".join(f"mkdir -p $(dirname {p}); echo planted >> {p}" for p in targets) + "; echo done",
                     protected=protected)
    assert "done" in out, out
    assert {p: (ws / p).read_bytes() if (ws / p).exists() else None for p in targets} == before, out
    assert all(SET_ASIDE in p.name for p in runner.set_aside), runner.set_aside  # none left in place


def test_every_route_is_refused_every_protected_class(runner, home):
    protected = checkout(runner.ws)
    every_route_is_refused(runner, protected, TARGETS)
    assert protected.why(runner.ws.resolve() / "work" / "notes.txt") is None
    # The missing hooks folder the global config names could not be made (an empty read-only file meanwhile).
    assert runner.set_aside == [] and not os.path.lexists(runner.ws / ".githooks")


def test_the_config_of_the_repository_the_workspace_sits_in_is_read(runner, home):
    """The workspace is a folder of a larger repository: that repository's config names its files too."""
    git("init", "-q", ".", cwd=runner.ws)
    config(runner.ws / ".git" / "config", "alias.y", "!sh inner/tools/outer.sh")
    write(runner.ws / "inner" / "tools" / "outer.sh", "original\n")
    inner = type(runner)(runner.who, runner.ws / "inner", runner.popen)
    every_route_is_refused(inner, Protected.of(inner.ws), {"tools/outer.sh": CONFIG})


def git_dirs(ws: Path) -> set[str]:
    """The git directories git itself finds from each working folder of ``ws`` (its own judgement, not ours).

    Not from inside a ``.git``: git takes it for one, as it should."""
    config = ws.parent / f"{ws.name}-safe.gitconfig"
    config.write_text("[safe]\n\tdirectory = *\n")  # as root, git would refuse a folder another user owns
    env = {"PATH": os.defpath, "HOME": str(ws.parent), "GIT_CONFIG_GLOBAL": str(config), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CEILING_DIRECTORIES": str(ws.parent)}
    found = set()
    for folder, dirs, _ in os.walk(ws):
        dirs[:] = [d for d in dirs if d != ".git"]
        done = subprocess.run(["git", "rev-parse", "--absolute-git-dir"], cwd=folder, env=env,
                              capture_output=True, text=True, check=False)
        if done.returncode == 0:
            found.add(done.stdout.strip())
    config.unlink()
    return found


MADE_BY_COMMAND = {
    "src": "git init -q src",
    "bare": "git init -q --bare bare",
    "manual": "mkdir -p manual/objects manual/refs && echo 'ref: refs/heads/main' > manual/HEAD",
    "reftable": "mkdir -p rt/objects && echo x > rt/refs && echo 'ref: refs/heads/main' > rt/HEAD",
    "linked": "mkdir -p wt && echo 'ref: refs/heads/main' > wt/HEAD && echo ../manual > wt/commondir",
    "the workspace": "mkdir -p objects refs && echo 'ref: refs/heads/main' > HEAD",
}


def test_a_repository_a_command_makes_is_set_aside_whatever_its_shape(runner):
    assert git_dirs(runner.ws) == set()
    out = runner.run(" && ".join(MADE_BY_COMMAND.values()) + " && echo done", protected=Protected.of(runner.ws))
    assert "done" in out, out
    assert sorted(str(p.relative_to(runner.ws)) for p in runner.set_aside) == [
        f"{name}{SET_ASIDE}" for name in ("HEAD", "bare/HEAD", "manual/HEAD", "rt/HEAD", "src/.git",
                                          f"src/.git{SET_ASIDE}/HEAD", "wt/HEAD")]
    assert git_dirs(runner.ws) == set(), runner.set_aside


WRITES = {  # folder -> the files that, written in this order, make it a git directory
    "bare": ["HEAD", "objects/.keep", "refs/.keep"],
    "reftable": ["HEAD", "objects/.keep", "refs"],
    "refs-first": ["objects/.keep", "refs/.keep", "HEAD"],
    "linked": ["HEAD", "commondir"],
    ".": ["objects/.keep", "refs/.keep", "HEAD"],  # the workspace itself
}


def test_write_cannot_assemble_a_git_directory_file_by_file(runner):
    ws = runner.ws
    write(ws / "target" / "objects" / ".keep", "")  # what a commondir would lead to
    write(ws / "target" / "refs" / ".keep", "")
    tools = {t.name: t for t in builtin_tools(Workspace(ws), bash=None)}
    for folder, files in WRITES.items():
        answers = [tools["Write"].invoke({"file_path": str(Path(folder) / name),
                                          "content": "../target\n" if name == "commondir" else "ref: refs/heads/x\n"})
                   for name in files]
        assert "protected" in answers[-1] and GIT in answers[-1], (folder, answers)
        assert not [a for a in answers[:-1] if "protected" in a], (folder, answers)
    assert git_dirs(ws) == set()


def test_a_workspace_that_is_a_bare_repository_is_protected_whole(runner):
    git("init", "-q", "--bare", ".", cwd=runner.ws)
    write(runner.ws / "notes.txt", "original\n")
    every_route_is_refused(runner, Protected.of(runner.ws), {"config": GIT, "hooks/pre-commit": GIT, "notes.txt": GIT})


def test_the_folders_on_path_inside_the_workspace_are_protected_existing_or_not(runner, monkeypatch):
    # Before: with the project's virtual environment active (its bin/ on PATH) or node_modules/.bin
    # on PATH, a hook `ruff check .` or a server `mcp-server-x` ran, on the host, the program the
    # command had just rewritten there.
    ws = runner.ws
    write(ws / ".venv" / "bin" / "ruff", "#!/bin/sh\necho original\n")
    monkeypatch.setenv("PATH", os.pathsep.join([str(ws / ".venv" / "bin"), str(ws / "node_modules" / ".bin"),
                                                ".", str(ws.parent), os.environ["PATH"]]))
    protected = Protected.of(ws)
    every_route_is_refused(runner, protected, {".venv/bin/ruff": "a folder on PATH",
                                               "node_modules/.bin/prettier": "a folder on PATH"})
    assert protected.why(ws.resolve() / "notes.txt") is None  # "." or its parent on PATH: not the whole workspace


HOOK = {"PreToolUse": [{"hooks": [{"type": "command", "command": "sh scripts/guard.sh"}]}]}


def by_the_command_line(ws: Path) -> Workspace:
    """``deep-agent run``: the hook is an agent file's, found in the folder the run starts in."""
    import argparse

    import yaml

    from deep_agent.cli.run import workspace_of
    from subagents import discover_agents

    write(ws / ".claude" / "agents" / "guarded.md",
          f"---\n{yaml.safe_dump({'name': 'guarded', 'description': 'Guards.', 'hooks': HOOK})}---\nWork.\n")
    discover_agents(None, project_dir=ws, home=ws / "no-home")  # the file is read, trusted or not
    return workspace_of(argparse.Namespace(workspace=ws, allow_home_workspace=False), ws / "state")


def by_create_deep_agent(ws: Path) -> Workspace:
    """A library caller: ``Bash`` from ``builtin_tools(".")``, then the hook given to ``create_deep_agent``."""
    from deep_agent import ScriptedChatModel, create_deep_agent

    workspace = Workspace(".")
    create_deep_agent(ScriptedChatModel(default="done"), builtin_tools(workspace), hooks=HOOK)
    return workspace


def by_hook_middleware(ws: Path) -> Workspace:
    """A plain ``create_agent`` with the hook runner given as any middleware."""
    from langchain.agents import create_agent

    from deep_agent import ScriptedChatModel
    from subagents.definitions.hooks import HookMiddleware

    workspace = Workspace(".")
    create_agent(ScriptedChatModel(default="done"), builtin_tools(workspace),
                 middleware=[HookMiddleware(HOOK, scope="root")])
    return workspace


def by_a_child_of_subagent_middleware(ws: Path) -> Workspace:
    """A plain ``create_agent`` whose child, given to ``SubAgentMiddleware``, has the hook."""
    from langchain.agents import create_agent

    from deep_agent import ScriptedChatModel
    from middleware import SubAgentMiddleware

    workspace = Workspace(".")
    child = {"name": "guarded", "description": "Guards.", "hooks": HOOK, "model": ScriptedChatModel(default="d")}
    create_agent(ScriptedChatModel(default="done"), builtin_tools(workspace),
                 middleware=[SubAgentMiddleware([child], model_middleware=[], settings=DelegationSettings.of(
                     general_purpose=False,
                 ))])
    return workspace


ROUTES = [by_the_command_line, by_create_deep_agent, by_hook_middleware, by_a_child_of_subagent_middleware]


@pytest.mark.parametrize("route", ROUTES)
def test_the_scripts_a_hook_runs_are_protected_on_every_route_to_the_hooks(runner, monkeypatch, route):
    # Before: only the command line computed them; a library caller's Bash could rewrite the hook's script,
    # which then ran on the host at the next tool call. Every route reads the hooks through one normaliser,
    # which notes them for the protected set (subagents.definitions.on_host).
    write(runner.ws / "scripts" / "guard.sh", '. "$(dirname "$0")/lib.sh"\ncheck\n')
    write(runner.ws / "scripts" / "lib.sh", "check() { :; }\n")
    monkeypatch.chdir(runner.ws)  # hooks run their shell in the current folder
    workspace = route(runner.ws)
    every_route_is_refused(runner, workspace.protected, {"scripts/guard.sh": SCRIPT, "scripts/lib.sh": SCRIPT})


def test_the_script_an_mcp_server_runs_is_protected_however_its_config_was_read(runner, monkeypatch):
    from subagents import SubagentSpec

    write(runner.ws / "servers" / "files.py", "print('serving')\n")
    monkeypatch.chdir(runner.ws)
    workspace = Workspace(".")
    SubagentSpec(name="reader", description="Reads.", mcp_config={"files": {"command": "python3",
                                                                          "args": ["servers/files.py"]}})
    every_route_is_refused(runner, workspace.protected, {"servers/files.py": SCRIPT})


IMPORTED = "what this program imports"


def test_what_the_next_start_would_import_from_the_workspace_is_protected_existing_or_not(runner, monkeypatch):
    # Before: `python -m deep_agent` run in the workspace (or a script run from it) puts the workspace first on
    # Python's path, and a command's rich.py or langchain_core/__init__.py ran on the host at the next start.
    import langchain_core  # noqa: F401  (imported, as the program's modules are)
    import langgraph.graph  # noqa: F401  (a namespace package: its portions in the workspace are searched first)
    import rich  # noqa: F401

    write(runner.ws / "deep_agent" / "__init__.py", "original\n")  # a checkout of this program: all of it runs
    monkeypatch.syspath_prepend(str(runner.ws))
    protected = Protected.of(runner.ws)
    every_route_is_refused(runner, protected, {
        "rich.py": IMPORTED, "rich/__init__.py": IMPORTED, "langchain_core/__init__.py": IMPORTED,
        f"langchain_core{EXTENSION_SUFFIXES[0]}": IMPORTED, "langgraph/graph/state.py": IMPORTED,
        "deep_agent/__init__.py": IMPORTED, "deep_agent/cli/run.py": IMPORTED})
    assert protected.why(runner.ws.resolve() / "notes" / "rich.md") is None  # the rest stays the agent's


class EditableFinder:
    """What ``pip install -e .`` puts on :data:`sys.meta_path` (setuptools' ``_EditableFinder``): top-level names
    mapped to their folders, with no entry on :data:`sys.path`."""

    def __init__(self, mapping: dict[str, Path]) -> None:
        self.mapping = mapping

    def find_spec(self, name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if (folder := self.mapping.get(name)) is None:
            return None
        return spec_from_file_location(name, folder / "__init__.py", submodule_search_locations=[str(folder)])


def test_what_an_editable_install_loads_from_the_workspace_is_protected(runner, monkeypatch, request):
    # Before: after `pip install -e .` of a project in the workspace (this project's own setup), its packages
    # were loaded through setuptools' finder on sys.meta_path, not a folder of sys.path: a command rewrote
    # deep_agent/cli.py and the user's next `deep-agent` ran it on the host.
    ws = runner.ws.resolve()
    write(ws / "loaded" / "__init__.py", "")
    write(ws / "loaded" / "cli.py", "")
    write(ws / "later" / "__init__.py", "")  # installed, not imported yet: the next start may
    write(ws / "notes" / "loaded.md", "")
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, EditableFinder({"loaded": ws / "loaded",
                                                                             "later": ws / "later"})])
    monkeypatch.setattr("deep_agent.tools.protected.import_names", lambda: frozenset({"later"}))
    request.addfinalizer(lambda: [sys.modules.pop(name, None) for name in ("loaded", "loaded.cli")])
    importlib.import_module("loaded.cli")
    assert not any(str(ws) in entry for entry in sys.path)  # a finder, no folder on the import path
    protected = Protected.of(ws)
    every_route_is_refused(runner, protected, {"loaded/cli.py": IMPORTED, "loaded/new.py": IMPORTED,
                                               "later/__init__.py": IMPORTED})
    assert protected.why(ws / "notes" / "loaded.md") is None  # the rest stays the agent's


def hooked(ws: Path, *commands: str) -> Protected:
    """The protected set of ``ws`` whose agent file's hooks run ``commands`` (in ``ws``)."""
    hook = {"PreToolUse": [{"hooks": [{"type": "command", "command": c} for c in commands]}]}
    return Protected.of(ws, extra=files_run_by(SimpleNamespace(hooks=hook, mcp_config=None), ws))


def test_what_any_import_of_a_hooks_python_could_load_is_protected_existing_or_not(runner):
    # Before: only the files of the names a hook's script imported were kept (and of a package only its
    # __init__.py): a command's scripts/helpers/__init__.pyc beat helpers.py, pkg/__init__.abi3.so beat
    # pkg/__init__.py, scripts/selectors.py (which the imported subprocess imports) shadowed the standard
    # library, an edited tools/util.py (from .util import run) and a json.py beside `python3 -c` ran on the host.
    ws = runner.ws
    write(ws / "scripts" / "check.py", "import helpers, pkg, subprocess\n")
    write(ws / "scripts" / "helpers.py", "def run(): pass\n")
    write(ws / "scripts" / "pkg" / "__init__.py", "from .util import run\n")
    write(ws / "scripts" / "pkg" / "util.py", "def run(): pass\n")
    write(ws / "tools" / "__init__.py", "")
    write(ws / "tools" / "check.py", "from .util import run\n")
    write(ws / "tools" / "util.py", "def run(): pass\n")
    protected = hooked(ws, "python3 scripts/check.py", "python3 -m tools.check",
                       "python3 -c 'import json,sys; json.load(sys.stdin)'")
    every_route_is_refused(runner, protected, {
        "scripts/helpers/__init__.pyc": SCRIPT, f"scripts/pkg/__init__{EXTENSION_SUFFIXES[0]}": SCRIPT,
        "scripts/pkg/util.py": SCRIPT, "scripts/selectors.py": SCRIPT, "scripts/sitecustomize.py": SCRIPT,
        "tools/util.py": SCRIPT, "json.py": SCRIPT, "scripts/__pycache__/helpers.cpython-311.pyc": SCRIPT})
    for work in ("scripts/helpers/notes.txt", "scripts/data/json.txt", "notes/json.md"):
        assert protected.why(ws.resolve() / work) is None, work  # the rest stays the agent's


def test_what_node_would_load_for_a_relative_require_is_protected_existing_or_not(runner):
    # Before: require('./util') with util.js there kept util.js only: Node tries the bare scripts/util first.
    write(runner.ws / "scripts" / "check.js", "require('./util').run();\n")
    write(runner.ws / "scripts" / "util.js", "exports.run = () => 1;\n")
    every_route_is_refused(runner, hooked(runner.ws, "node scripts/check.js"),
                           {"scripts/util": SCRIPT, "scripts/util.cjs": SCRIPT, "scripts/util/index.js": SCRIPT})


def test_the_virtual_environment_a_hook_runs_from_is_protected_whole(runner):
    # Before: .venv/bin/python is a link leading out of the workspace: neither it, nor the venv's pyvenv.cfg,
    # nor a .pth file in its site-packages (run at every start) was protected.
    venv = runner.ws / ".venv"
    write(venv / "pyvenv.cfg", "home = /usr/bin\n")
    write(venv / "lib" / "python3.11" / "site-packages" / "x.py", "")
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to("/usr/bin/python3")
    write(runner.ws / "scripts" / "check.py", "print('ok')\n")
    every_route_is_refused(runner, hooked(runner.ws, ".venv/bin/python scripts/check.py"), {
        ".venv/pyvenv.cfg": SCRIPT, ".venv/lib/python3.11/site-packages/zz.pth": SCRIPT})


def test_what_the_next_start_would_try_to_import_from_the_workspace_is_protected(runner, monkeypatch):
    # Before: only the modules this program had imported were kept: sitecustomize.py, or an optional
    # dependency not imported yet, planted in the workspace, ran at the next start.
    monkeypatch.syspath_prepend(str(runner.ws))
    every_route_is_refused(runner, Protected.of(runner.ws), {"sitecustomize.py": IMPORTED,
                                                             "usercustomize/__init__.py": IMPORTED})


def test_the_fingerprint_changes_when_what_a_hooks_imports_could_load_changes(tmp_path):
    from deep_agent.cli.folder_trust import fingerprint

    write(tmp_path / "scripts" / "check.py", "import helpers\n")
    write(tmp_path / "scripts" / "helpers.py", "")
    write(tmp_path / "tools" / "__init__.py", "")
    write(tmp_path / "tools" / "check.py", "from .util import run\n")
    write(tmp_path / "tools" / "util.py", "")
    write(tmp_path / "scripts" / "check.js", "require('./util');\n")
    write(tmp_path / "scripts" / "util.js", "")
    write(tmp_path / ".venv" / "pyvenv.cfg", "home = /usr/bin\n")
    hook = {"PreToolUse": [{"hooks": [{"type": "command", "command": c} for c in (
        "python3 scripts/check.py", "python3 -m tools.check", "python3 -c 'import json'", "node scripts/check.js",
        ".venv/bin/python scripts/check.py")]}]}
    spec = SimpleNamespace(hooks=hook, mcp_config=None)
    before = fingerprint(files_run_by(spec, tmp_path, outside=True))
    for change in ("scripts/helpers/__init__.pyc", "json.py", "tools/util.py", "scripts/util",
                   ".venv/lib/site-packages/x.pth", "scripts/selectors.py"):
        write(tmp_path / change, "changed\n")
        after = fingerprint(files_run_by(spec, tmp_path, outside=True))
        assert after != before, change
        before = after  # nothing changes between two changes: the next one's starting point


TASK_RUNNER_FILES = {  # what the hooks below run through their task runner, and, missing, what would run instead
    "Makefile": "all:\n\t@echo made\nlint:\n\t@python3 tools/gen.py\ninclude common.mk\n-include local.mk\n",
    "common.mk": "X = 1\n", "local.mk": None,
    "tools/gen.py": "",
    "GNUmakefile": None, "package.json": '{"main": "index.js", "scripts": {"lint": "node scripts/lint.js"}}\n',
    "scripts/lint.js": "", "node_modules/.bin/eslint": "#!/bin/sh\n", ".npmrc": None,
    ".pre-commit-config.yaml": "repos:\n- repo: local\n  hooks:\n  - {id: c, name: c, entry: python3 tools/c.py,"
                               " language: system}\n", "tools/c.py": "",
    "pyproject.toml": "[project]\nname = 'x'\n", "uv.toml": None, "tox.ini": "[tox]\n", "noxfile.py": "",
    "conftest.py": "", "setup.cfg": None,
}


def test_the_files_a_hooks_task_runner_reads_as_code_are_protected_existing_or_not(runner):
    # Before: a hook `make lint` (or `npm run lint`, `pre-commit run`, `uv run pytest`, `tox`, `nox`) ran the
    # Makefile and what it includes, package.json's scripts and node_modules, the pre-commit config's entries,
    # pyproject.toml, tox.ini, noxfile.py, conftest.py on the host: a sandboxed command rewrote them (or made a
    # GNUmakefile, which make reads first) and the next hook ran them.
    ws = runner.ws
    for path, text in TASK_RUNNER_FILES.items():
        if text is not None:
            write(ws / path, text)
    (ws / "node_modules" / ".bin" / "eslint").chmod(0o755)
    write(ws / "index.js", "")
    write(ws / "notes.txt", "")
    protected = hooked(ws, "make lint", "npm run lint", "pre-commit run --all-files", "uv run pytest -q", "tox",
                       "nox -s lint")
    every_route_is_refused(runner, protected, {path: SCRIPT for path in TASK_RUNNER_FILES})
    for work in ("index.js", "notes.txt", "src/x.py"):  # named by package.json, or by nothing: the agent's
        assert protected.why(ws.resolve() / work) is None, work
    # A missing GNUmakefile or included local.mk is no placeholder make reads (it is set aside once made).
    assert "made" in runner.run("make", protected=protected)
    assert hooked(ws, "ruff check .").why(ws.resolve() / "Makefile") is None  # a program not in the table


def test_the_fingerprint_covers_what_a_hooks_task_runner_reads(tmp_path):
    from deep_agent.cli.folder_trust import fingerprint

    write(tmp_path / "Makefile", "include common.mk\n")
    write(tmp_path / "common.mk", "")
    write(tmp_path / "package.json", '{"scripts": {"lint": "node scripts/lint.js"}}\n')
    write(tmp_path / "scripts" / "lint.js", "")
    hook = {"PreToolUse": [{"hooks": [{"type": "command", "command": c} for c in ("make lint", "npx eslint .")]}]}
    spec = SimpleNamespace(hooks=hook, mcp_config=None)
    for change in ("common.mk", "GNUmakefile", "scripts/lint.js", "node_modules/x.js", "package.json", "Makefile"):
        before = fingerprint(files_run_by(spec, tmp_path, outside=True))
        write(tmp_path / change, "changed\n")
        assert fingerprint(files_run_by(spec, tmp_path, outside=True)) != before, change


def bash_as_the_user(runner, protected: Protected, command: str, hooks: dict | None = None) -> str:
    """The Bash tool's answer to ``command``, run by a process of the runner's user (root ignores the write
    bits), which first reads ``hooks`` (an agent file's, noted as run on the host) in the workspace."""
    from subagents.definitions.on_host import note

    read, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read)
            if "user" in runner.popen:
                os.setgid(runner.popen["group"])
                os.setuid(runner.popen["user"])
            os.chdir(runner.ws)
            note(hooks=hooks)
            (bash,) = [t for t in builtin_tools(Workspace(runner.ws, protected=protected)) if t.name == "Bash"]
            os.write(write_end, bash.invoke({"command": command, "timeout": 20_000}).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, answer
    return answer


def test_the_bash_tool_names_what_it_set_aside_and_why(runner):
    # Before: a GNUmakefile (or json.py) a command made where a protected path was missing was set aside with
    # an answer that spoke of git repositories only, not naming the path nor why.
    ws = runner.ws
    protected = hooked(ws, "make lint", "python3 -c 'import json'")
    runner.chown(ws)
    answer = bash_as_the_user(runner, protected, "touch GNUmakefile json.py && echo made")
    assert "made\n" in answer and not (ws / "GNUmakefile").exists() and not (ws / "json.py").exists(), answer
    for path in ("GNUmakefile", "json.py"):
        assert f"{path} (now {path}{SET_ASIDE}): {SCRIPT}" in answer, answer


def test_a_hook_naming_a_path_the_user_cannot_read_leaves_the_checks_whole(runner):
    # Before: pathlib's is_dir/is_file raise PermissionError on Python 3.11; a hook that named a file in a
    # folder the user may not search (sh /srv/private/x.sh) made every protected set fail, so each Bash call
    # ended with "could not be checked" and a repository it made was left in place for git to run.
    if "user" not in runner.popen and os.getuid() == 0:
        pytest.skip("root may search every folder")
    private = Path(tempfile.mkdtemp(prefix="private-"))  # root's own (0700) when the command's user is nobody
    try:
        write(private / "scripts" / "check.py", "import json\n")
        private.chmod(0o700 if "user" in runner.popen else 0)
        hooks = {"PreToolUse": [{"hooks": [{"type": "command", "command": f"python3 {private}/scripts/check.py"}]}]}
        protected = Protected.of(runner.ws)
        runner.chown(runner.ws)
        answer = bash_as_the_user(runner, protected, "git init -q sub && echo made", hooks=hooks)
    finally:
        private.chmod(0o700)
        shutil.rmtree(private, ignore_errors=True)
    assert "made\n" in answer and "could not be checked" not in answer, answer
    assert not (runner.ws / "sub" / ".git").exists() and (runner.ws / "sub" / f".git{SET_ASIDE}").is_dir(), answer


def test_a_file_a_task_runners_script_runs_is_protected_existing_or_not(runner):
    # Before: only what already existed counted: make's `-include local.mk` and package.json's
    # `node scripts/lint.js`, both missing, were made by a command and run by the hook on the host.
    ws = runner.ws
    write(ws / "Makefile", "-include local.mk\nlint:\n\t@echo lint-ok\n\tmkdir build\n\t. ./env.sh\n")
    write(ws / "package.json", '{"scripts": {"lint": "node scripts/lint.js", "build": "cargo build"}}\n')
    protected = hooked(ws, "make -s lint", "npm run -s lint", "sh local.sh")
    every_route_is_refused(runner, protected, {"local.mk": SCRIPT, "scripts/lint.js": SCRIPT, "env.sh": SCRIPT,
                                               "local.sh": SCRIPT})
    for work in ("lint-ok", "build/out", "lint"):  # a word that is no file to run stays the agent's
        assert protected.why(ws.resolve() / work) is None, work


@pytest.mark.parametrize("line", ["#!/usr/bin/env python3", "#!/usr/bin/python3.11 -u", "#!.venv/bin/python"])
def test_a_python_script_is_known_by_its_first_line_not_its_suffix(runner, line):
    # Before: only a .py file's imports were followed: ./hooks/guard, a Python script without the suffix,
    # imported a json.py a command made beside it, on the host.
    write(runner.ws / "hooks" / "guard", f"{line}\nimport json, sys\nfrom helpers import util\n")
    write(runner.ws / "hooks" / "tool", "#!/usr/bin/env node\nrequire('./util');\n")
    every_route_is_refused(runner, hooked(runner.ws, "./hooks/guard", "hooks/tool"), {
        "hooks/json.py": SCRIPT, "hooks/helpers.py": SCRIPT, "hooks/util.js": SCRIPT})


def test_what_from_a_import_b_loads_as_a_module_is_protected_existing_or_not(runner):
    # Before: `from helpers import util`, helpers/ without __init__.py, kept helpers/__init__.py and helpers.py:
    # helpers/util.py, which it imports, was edited and ran on the host.
    write(runner.ws / "hooks" / "check.py", "from helpers import util\nfrom .pkg import tool\n")
    write(runner.ws / "hooks" / "helpers" / "util.py", "def run(): pass\n")
    write(runner.ws / "hooks" / "__init__.py", "")
    every_route_is_refused(runner, hooked(runner.ws, "python3 hooks/check.py"), {
        "hooks/helpers/util.py": SCRIPT, "hooks/helpers/util/__init__.py": SCRIPT,
        f"hooks/helpers/util{EXTENSION_SUFFIXES[0]}": SCRIPT, "hooks/pkg/tool.py": SCRIPT})
    assert hooked(runner.ws, "python3 hooks/check.py").why(runner.ws.resolve() / "hooks/helpers/notes.md") is None


def test_the_environment_a_hooks_program_is_found_in_on_path_is_protected_whole(runner, monkeypatch):
    # Before: with .venv/bin or node_modules/.bin on PATH, those folders were protected, not what they lead
    # to: a .pth in the venv's site-packages ran in the hook's `python3`, and `mytool`, a link into
    # node_modules/mytool/bin/cli.sh, ran that file as a command had rewritten it.
    ws = runner.ws
    write(ws / ".venv" / "pyvenv.cfg", "home = /usr/bin\n")
    write(ws / ".venv" / "lib" / "python3.11" / "site-packages" / "x.py", "")
    (ws / ".venv" / "bin").mkdir()
    (ws / ".venv" / "bin" / "python3").symlink_to("/usr/bin/python3")
    write(ws / "node_modules" / "mytool" / "bin" / "cli.sh", "#!/bin/sh\necho ok\n")
    write(ws / "node_modules" / "mytool" / "package.json", "{}\n")
    (ws / "node_modules" / "mytool" / "bin" / "cli.sh").chmod(0o755)
    (ws / "node_modules" / ".bin").mkdir()
    (ws / "node_modules" / ".bin" / "mytool").symlink_to("../mytool/bin/cli.sh")
    write(ws / "hooks" / "check.py", "print('ok')\n")
    monkeypatch.setenv("PATH", os.pathsep.join([str(ws / ".venv" / "bin"), "node_modules/.bin",
                                                os.environ["PATH"]]))
    every_route_is_refused(runner, hooked(ws, "python3 hooks/check.py", "mytool --check"), {
        ".venv/lib/python3.11/site-packages/zz.pth": SCRIPT, "node_modules/mytool/bin/cli.sh": SCRIPT,
        "node_modules/mytool/lib/x.js": SCRIPT})
    pth = ws.resolve() / ".venv/lib/python3.11/site-packages/zz.pth"  # a recipe's python3 is found there too
    assert SCRIPT in (hooked(ws, "make -s lint").why(pth) or "")


def test_the_fingerprint_covers_what_scripts_name_and_programs_lead_to(tmp_path, monkeypatch):
    from deep_agent.cli.folder_trust import fingerprint

    write(tmp_path / "Makefile", "-include local.mk\n")
    write(tmp_path / "hooks" / "guard", "#!/usr/bin/env python3\nfrom helpers import util\n")
    write(tmp_path / "node_modules" / "mytool" / "cli.sh", "")
    (tmp_path / "node_modules" / ".bin").mkdir()
    (tmp_path / "node_modules" / ".bin" / "mytool").symlink_to("../mytool/cli.sh")
    (tmp_path / "node_modules" / "mytool" / "cli.sh").chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / "node_modules" / ".bin"), os.environ["PATH"]]))
    hook = {"PreToolUse": [{"hooks": [{"type": "command", "command": c} for c in ("make", "./hooks/guard",
                                                                                   "mytool")]}]}
    spec = SimpleNamespace(hooks=hook, mcp_config=None)
    for change in ("local.mk", "hooks/json.py", "hooks/helpers/util.py", "node_modules/mytool/x.js"):
        before = fingerprint(files_run_by(spec, tmp_path, outside=True))
        write(tmp_path / change, "changed\n")
        assert fingerprint(files_run_by(spec, tmp_path, outside=True)) != before, change
