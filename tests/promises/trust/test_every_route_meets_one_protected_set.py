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
* the agent files and the state folder (hooks and MCP servers need none:
  they run in the sandbox too, ``test_what_a_folder_defines_runs_confined``).

Before: a bare repository whose ``refs`` is a file, a ``HEAD`` + ``commondir``
folder and the workspace itself were no git directories; only a list of keys
was read, so ``alias.x = !sh tools/alias.sh`` or a global ``core.pager`` left
their scripts writable; a file a hook's script sources was writable; Write
could assemble a bare repository file by file.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec
from importlib.util import spec_from_file_location
from pathlib import Path

import pytest

from deep_agent.tools import Workspace, builtin_tools
from deep_agent.tools._protected import Protected
from deep_agent.tools._sandbox import SET_ASIDE

GIT = "a git directory"
CONFIG = "a path a git config names"
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
    for path in TARGETS:
        if not (ws / path).exists() and path not in (".git/hooks/pre-commit", ".githooks/pre-commit"):
            write(ws / path, "original\n")
    return Protected.of(ws, state_dir="state")


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
        "deep_agent/__init__.py": IMPORTED, "deep_agent/cli/_run.py": IMPORTED})
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
    monkeypatch.setattr("deep_agent.tools._protected.import_names", lambda: frozenset({"later"}))
    request.addfinalizer(lambda: [sys.modules.pop(name, None) for name in ("loaded", "loaded.cli")])
    importlib.import_module("loaded.cli")
    assert not any(str(ws) in entry for entry in sys.path)  # a finder, no folder on the import path
    protected = Protected.of(ws)
    every_route_is_refused(runner, protected, {"loaded/cli.py": IMPORTED, "loaded/new.py": IMPORTED,
                                               "later/__init__.py": IMPORTED})
    assert protected.why(ws / "notes" / "loaded.md") is None  # the rest stays the agent's


def test_what_the_next_start_would_try_to_import_from_the_workspace_is_protected(runner, monkeypatch):
    # Before: only the modules this program had imported were kept: sitecustomize.py, or an optional
    # dependency not imported yet, planted in the workspace, ran at the next start.
    monkeypatch.syspath_prepend(str(runner.ws))
    every_route_is_refused(runner, Protected.of(runner.ws), {"sitecustomize.py": IMPORTED,
                                                             "usercustomize/__init__.py": IMPORTED})


def bash_as_the_user(runner, protected: Protected, command: str) -> str:
    """The Bash tool's answer to ``command``, run by a process of the runner's user (root ignores the write
    bits) in the workspace."""
    def answer() -> str:
        (bash,) = [t for t in builtin_tools(Workspace(runner.ws, protected=protected)) if t.name == "Bash"]
        return str(bash.invoke({"command": command, "timeout": 20_000}))

    return runner.in_a_process(answer)


def test_the_bash_tool_names_what_it_set_aside_and_why(runner, monkeypatch):
    # Before: a sitecustomize.py (or a repository) a command made where a protected path was missing was set
    # aside with an answer that spoke of git repositories only, not naming the path nor why.
    ws = runner.ws
    monkeypatch.syspath_prepend(str(ws))
    protected = Protected.of(ws)
    runner.chown(ws)
    answer = bash_as_the_user(runner, protected, "touch sitecustomize.py && git init -q sub && echo made")
    assert "made\n" in answer and not (ws / "sitecustomize.py").exists(), answer
    assert f"sitecustomize.py (now sitecustomize.py{SET_ASIDE}): {IMPORTED}" in answer, answer
    assert f"sub/.git (now .git{SET_ASIDE}): {GIT}" in answer, answer


X_RUNS_Y = {"scripts/x.sh": "sh scripts/y.sh\n", "scripts/y.sh": "true\n"}
UNSEEN = [  # (git config, files, what a command plants): code the reader cannot see is read as all a text names
    ({"alias.f": '!f() { sh "$1"; }; f scripts/x.sh'}, X_RUNS_Y, "scripts/y.sh"),  # a function's argument
    ({"alias.f": '!f() { python3 -m "$1"; }; f mytool'}, {"mytool.py": "ok\n"}, "mytool.py"),
    ({"alias.r": "!alias r='sh scripts/x.sh'; r"}, X_RUNS_Y, "scripts/y.sh"),  # an alias the text defines
    ({"alias.p": "!cd sub && python3 <<EOF\nimport mytool\nEOF"}, {"sub/mytool.py": "ok\n"}, "sub/mytool.py"),
    ({"alias.p": "!cat code.txt | python3"}, {"code.txt": "import mytool\n", "mytool.py": "ok\n"}, "mytool.py"),
    ({"alias.n": "!npm --prefix sub run x"}, {"sub/package.json": '{"scripts": {"x": "sh run.sh"}}',
                                             "sub/run.sh": "true\n"}, "sub/run.sh"),
    ({"alias.n": "!npm run x"}, {"package.json": '{"scripts": {"x": "sh tools/run.sh"}}'}, "package.json"),
    ({"alias.b": "!sh big.sh"}, {"big.sh": "#" * (1 << 20) + "\nsh scripts/y.sh\n"}, "scripts/y.sh"),  # unread
    ({"alias.x": "!echo scripts/x.sh | xargs sh"}, X_RUNS_Y, "scripts/y.sh"),
    ({"alias.x": "!xargs -a list sh"}, {"list": "scripts/x.sh\n", **X_RUNS_Y}, "scripts/y.sh"),
    ({"alias.m": "!echo mytool | xargs python3 -m"}, {"mytool.py": "ok\n"}, "mytool.py"),
    ({}, {".envrc": 'PATH_add "$(expand_path tools)/bin"\n', "tools/bin/lint": "true\n"}, "tools/bin/black"),
    ({}, {".envrc": 'source "$(expand_path lib)/env.sh"\n', "lib/env.sh": "true\n"}, "lib/env.sh"),
    ({"alias.q": "!echo '`'; echo `sh scripts/x.sh`"}, X_RUNS_Y, "scripts/x.sh"),  # a quoted backquote first
]


@pytest.mark.parametrize(("configs", "files", "planted"), UNSEEN, ids=[f"{n}-{r[2]}" for n, r in enumerate(UNSEEN)])
def test_what_the_reader_cannot_evaluate_holds_more_never_less(runner, configs, files, planted):
    ws = runner.ws
    git("init", "-q", ".", cwd=ws)
    for key, value in configs.items():
        config(ws / ".git" / "config", key, value)
    for path, text in files.items():
        write(ws / path, text)
    protected = Protected.of(ws)
    assert protected.why(ws.resolve() / planted) is not None, planted
    runner.chown(ws)
    out = runner.run(f"mkdir -p $(dirname {planted}); printf evil > {planted}; echo done", protected=protected)
    assert "done" in out and (files.get(planted) is None) == (not (ws / planted).is_file()), out
    assert not (ws / planted).is_file() or (ws / planted).read_text() == files[planted], out


def test_an_hgrc_past_the_readers_bound_holds_the_working_tree(runner, monkeypatch):
    """A checkout's ``.hg/hgrc`` of thousands of includes and hooks was read to its end, each value a command (a
    minute of start for 50,000); the reader stops at its bound and holds the working tree whole instead."""
    from deep_agent.tools import _host_code as host_code, _protected as protected

    ws = runner.ws
    write(ws / ".hg" / "hgrc", "".join(f"%include missing{n}.rc\n" for n in range(3000))
          + "[hooks]\npost-status = sh scripts/late.sh\n")
    write(ws / "scripts" / "late.sh", "true\n")
    reads: list[Path] = []
    real = host_code.read_regular
    for module in (host_code, protected):
        monkeypatch.setattr(module, "read_regular", lambda path, limit: reads.append(path) or real(path, limit))
    held = Protected.of(ws)
    assert held.why(ws.resolve() / "scripts" / "late.sh") is not None
    assert len({path for path in reads if path.name.startswith("missing")}) <= 1000, len(reads)


class _Unbounded(Exception):
    pass


@pytest.mark.parametrize("where", ["a hook of the user's", "an .envrc the agent wrote"])
def test_a_text_of_many_cds_is_read_in_bounded_work_and_holds_its_folder(runner, monkeypatch, where):
    """Each ``cd`` may be read from every folder so far, missing ones too, so folders doubled with each: twelve
    ``(cd svcK && make lint)`` lines of a monorepo's hook took half a minute to read, an agent-written ``.envrc``
    of 24 ``cd`` lines hung the next run's start. The reader stops at its bound and holds the text's folder."""
    from deep_agent.tools import _host_code as host_code

    ws = runner.ws
    if where == "an .envrc the agent wrote":
        folder, lines = ws / "sub", [f"cd d{k}\n" for k in range(24)]
        write(folder / ".envrc", "".join(lines))
    else:
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        folder, lines = ws, [f"(cd svc{k} && make lint)\n" for k in range(16)]
        for k in range(16):
            (ws / f"svc{k}").mkdir()
        write(ws / ".git" / "hooks" / "pre-commit", "#!/bin/sh\n" + "".join(lines))
    pairs = 0
    real = host_code._runs

    def counted(*args, **kwargs):  # each (command, folder) pair the reader reads; the old code's went past a million
        nonlocal pairs
        pairs += 1
        if pairs > 100_000:
            raise _Unbounded(pairs)
        return real(*args, **kwargs)

    monkeypatch.setattr(host_code, "_runs", counted)
    held = Protected.of(ws)
    assert held.why(folder.resolve() / "new.sh") is not None  # the folder it runs in, whole
