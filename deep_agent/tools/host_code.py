"""What hooks and MCP servers run on the host: their commands, and the files those run or load.

One idea, read by two places: the protected set (:mod:`deep_agent.tools.protected`) keeps these files
out of every tool's reach, and folder trust (:mod:`deep_agent.cli.folder_trust`) shows the commands and
fingerprints the files, so a changed script asks again.
"""

from __future__ import annotations

import ast
import functools
import importlib.machinery
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import stat
import sys
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml


def shell_words(command: str) -> list[str]:
    """``command``'s words as ``sh`` splits them (operators apart); plain whitespace if it cannot be parsed."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:  # an unclosed quote: the shell would refuse it too, but look at its words anyway
        return command.split()


WORD_PARTS = re.compile(rf"[\s={re.escape(os.pathsep)}]+")
"""Where a word is split again into the paths it may hold: ``--out=./x``, ``PYTHONPATH=a:b``, a quoted ``sh x``."""


def read_regular(path: Path, limit: int) -> bytes:
    """The first ``limit`` bytes of ``path`` if it is a regular file; ``b""`` otherwise.

    Opened without blocking and checked on the open file: a pipe planted in its place is never waited on.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        return os.read(fd, limit) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return b""
    finally:
        os.close(fd)


def _hook_commands(value: Any, event: str = "") -> Iterator[tuple[str, str]]:
    """``(event, shell command)`` for every hook command of a hooks mapping, at any depth."""
    if isinstance(value, Mapping):
        if isinstance(value.get("command"), str):
            yield event, value["command"]
        for key, item in value.items():
            yield from _hook_commands(item, event or str(key))
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _hook_commands(item, event)


def _servers(value: Any) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(name, config)`` of every MCP server of a normalised ``mcp_config``."""
    if isinstance(value, Mapping):
        for name, config in value.items():
            if isinstance(config, Mapping):
                yield str(name), config


def _args(server: Mapping[str, Any]) -> list[str]:
    args = server.get("args")
    return [str(a) for a in args] if isinstance(args, list) else []


def _env(server: Mapping[str, Any]) -> Mapping[str, Any]:
    env = server.get("env")
    return env if isinstance(env, Mapping) else {}


def what_would_run(spec: Any) -> list[str]:
    """What an agent file's hooks and MCP servers would run, whole; ``[]`` for a plain file.

    Every hook command; every server's command line (quoted as a shell
    would read it, so each argument's bounds show), each ``env`` entry (name
    and value) and its ``cwd``, or the URL it connects to. Lines are raw
    text: :func:`describe` escapes them for the terminal.
    """
    found = [f"hook{f' ({event})' if event else ''}: {command}"
             for event, command in _hook_commands(getattr(spec, "hooks", None) or {})]
    for name, server in _servers(getattr(spec, "mcp_config", None) or {}):
        if isinstance(server.get("command"), str):
            found.append(f"MCP server {name}: {shlex.join([server['command'], *_args(server)])}")
            found += [f"  env {key}={value}" for key, value in _env(server).items()]
            if server.get("cwd"):
                found.append(f"  cwd {server['cwd']}")
        elif isinstance(server.get("url"), str):
            found.append(f"MCP server {name}: connects to {server['url']}")
    return found


# ----------------------------------------------------------------------------
# The files a folder's hooks and MCP servers run: trusted with the agent files.
#
# An agent file that says ``command: sh scripts/check.sh`` runs whatever
# ``scripts/check.sh`` holds the day it runs. :func:`files_run_by` names
# those files; the trust fingerprint covers them, so a changed script asks
# again, and a run can keep them out of reach of what it lets write.
#
# Example::
#
#     files_run_by(spec, Path("/home/me/project"))
#     # [PosixPath('/home/me/project/.cache'), PosixPath('/home/me/project/scripts/check.sh')]
# ----------------------------------------------------------------------------


def files_run_by(spec: Any, folder: Path, *, within: Path | None = None, outside: bool = False) -> list[Path]:
    """The files (and folders) inside ``folder`` that one agent definition's hooks and MCP servers run or load.

    ``spec`` is a discovered definition's value (a ``SubagentSpec``, or
    anything with its normalised ``hooks`` and ``mcp_config``); ``folder``
    is the folder the run starts in: hooks run their shell there, and an MCP
    server's ``cwd`` is resolved from it. Named are:

    * each word of a hook's command line (split as the shell splits it, and
      at ``=`` and ``:``) that names an existing file, or that holds a ``/``
      or is run by its place (a script not there yet: ``sh local.sh``,
      :func:`_given_to_run`), resolved against ``folder``;
    * each program a bare word is on the ``PATH`` the command runs with (a
      server's ``env`` may give one), the file its link leads to, and the
      virtual environment or Node package it lies in, whole
      (``python3`` from an active ``.venv``);
    * an MCP server's ``command`` and ``args`` as a hook's words, resolved
      against the server's ``cwd``;
    * each path an ``env`` value names (``PYTHONPATH=./lib:./.cache``,
      ``NODE_OPTIONS=--require ./x.js``), folders included;
    * the module files of ``python -m pkg.mod`` (in a hook or a server);
    * what a task runner the command line names reads as code (:data:`TASK_RUNNERS`: ``make lint``'s
      ``Makefile``), existing or not, from the folder it runs in and each folder a word names;
    * in turn, each file a script named so far names (:func:`_named_by_scripts`:
      ``. scripts/lib.sh``, ``source "$(dirname "$0")/lib.sh"``, make's ``-include local.mk``), and
      what a Python or Node script (by its ``#!`` line, else its suffix) imports.

    Returned: sorted, de-duplicated, resolved (symlinks followed), and only
    what lies strictly inside ``folder`` (never ``folder`` itself: it is the
    workspace). A path may not exist yet; a caller that binds these
    read-only skips or creates the missing ones. Folders are named only by
    ``env`` entries (a server's ``env``, or a hook's ``NAME=value`` word) and
    :data:`TASK_RUNNERS` (``node_modules``): a folder as an argument (``ruff check src``) is work, not code to keep. A
    file a hook names to write (``touch out/done``) is named too: once it
    changes, the trust fingerprint asks again. Call it once per definition, e.g.
    ``{p for d in found.definitions.values() for p in files_run_by(d.value, Path.cwd())}``.

    ``within`` (default ``folder``): the folder whose files are kept, for a
    caller protecting a workspace that holds ``folder`` (``../scripts/x.sh``
    from a subfolder is the workspace's file too). ``outside``: also what a
    relative word names outside it (``../shared/x.sh``, a symlink leading
    out), for the trust fingerprint; never what an absolute path names (the
    machine's own programs), nor a folder holding ``folder``.
    """
    start = folder.resolve()
    root = None if outside else within.resolve() if within is not None else start
    found: set[Path] = set()
    for _, command in _hook_commands(getattr(spec, "hooks", None) or {}):
        found.update(_named_files(shell_words(command), start, root, os.environ.get("PATH", "")))
    for _, server in _servers(getattr(spec, "mcp_config", None) or {}):
        if not isinstance(server.get("command"), str):
            continue
        base = _resolved(start / str(server["cwd"])) if server.get("cwd") else start
        if base is None:
            continue
        env = _env(server)
        for value in env.values():
            words = [w for w in WORD_PARTS.split(str(value)) if w]
            found.update(p for w in words if (p := _inside(w, base, root, folders=True)) is not None)
        search = str(env.get("PATH", os.environ.get("PATH", "")))  # the adapters pass the host's on
        found.update(_named_files([str(server["command"]), *_args(server)], base, root, search))
    return sorted(_named_by_scripts(found, start, root))


def protect_what_runs(definitions: Iterable[Any], folder: Path | None = None) -> list[Path]:
    """Keep what these definitions' hooks and MCP servers run or load out of every tool's reach; those paths.

    Each is named by :func:`files_run_by` from ``folder`` (default: the
    current one, where hooks run their shell), wherever it lies, with the
    ``__pycache__`` folder beside each Python file, and added to
    :data:`~deep_agent.tools.protected.HOST_CODE`: the protected set of every
    workspace holds those inside it, made before or after. The protected set
    calls it for every hook mapping and server config the process read
    (:mod:`subagents.definitions.on_host`).
    """
    start = (folder or Path.cwd()).resolve()
    run = {path for spec in definitions for path in files_run_by(spec, start, within=Path(start.anchor))}
    # Python runs a module's cached bytecode in place of its source when the cache's stamp matches the
    # source's (mtime and size, which a command can read): a .pyc planted in __pycache__ ran as the hook's
    # module. That folder is Python's to write when the hook runs, never the agent's (nor in the fingerprint).
    run |= {path.parent / "__pycache__" for path in run if path.suffix == ".py"}
    return sorted(run)


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


_PYTHON = re.compile(r"python[0-9.]*")
"""A Python interpreter's program name (``python3``, ``.venv/bin/python3.11``)."""

_MAKE = ("GNUmakefile", "makefile", "Makefile")
_NODE = ("package.json", ".npmrc", "node_modules")
_PYPROJECT = ("pyproject.toml", "setup.py", "setup.cfg")
TASK_RUNNERS: dict[str, tuple[str, ...]] = {
    "make": _MAKE, "gmake": _MAKE,
    "npm": _NODE, "npx": _NODE, "pnpm": (*_NODE, ".pnpmfile.cjs"),
    "yarn": (*_NODE, ".yarnrc", ".yarnrc.yml", ".yarn", ".pnp.cjs"),
    "pre-commit": (".pre-commit-config.yaml",),
    "uv": (*_PYPROJECT, "uv.toml", ".python-version", ".venv"), "poetry": (*_PYPROJECT, "poetry.toml", ".venv"),
    "tox": (*_PYPROJECT, "tox.ini", ".tox"), "nox": ("noxfile.py", ".nox"),
    "pytest": ("conftest.py", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"),
}
"""A task runner's program name -> the files and folders (whole) of the folder it runs in that it reads as
code, existing or not: ``make lint`` runs the first ``GNUmakefile``, ``makefile`` or ``Makefile`` there;
``npm run lint`` package.json's script, with ``node_modules`` (``.bin`` and the packages it leads to) on
its way. What those files run in turn is found in their text (:func:`_named_by_scripts`); a word anywhere
in a command line counts (``uv run pytest``, ``python -m tox``)."""


def _named_files(words: list[str], base: Path, root: Path | None, search: str) -> Iterator[Path]:
    """The files inside ``root`` that ``words`` name, relative to ``base``, and to each folder a word
    names (``cd scripts && sh guard.sh``); of a word holding a ``/``, what follows each ``/`` too if an
    existing file (``sh "$(pwd)/scripts/guard.sh"``), as in a script's text; the program a bare word is
    on ``search`` (the ``PATH`` the command runs with: :func:`_which`), as its link leads; the virtual
    environment or Node package a word, a program or a ``search`` folder lies in, whole (:func:`_environments`:
    an active ``.venv``, whose programs a makefile's recipe may run too); and what Python could import from
    ``base`` when it starts there (``python -c``, ``python -m``: :func:`would_import`)."""
    bases = [base, *(p for w in words if (p := _inside(w, base, root, folders=True)) is not None and os.path.isdir(p))]
    yield from _environments([Path(os.path.normpath(base / (d or os.curdir))) for d in search.split(os.pathsep)],
                             base, root or base)
    python = False  # a Python interpreter is this simple command's program
    for before, word in zip(["", *words], words, strict=False):
        if not word.strip("|&;()<>"):
            python = False  # a shell operator: the next command starts
        python = python or _PYTHON.fullmatch(os.path.basename(word)) is not None
        module = word if before == "-m" else word[2:] if word.startswith("-m") else ""
        if module and all(part.isidentifier() for part in module.split(".")):
            # python -m pkg.mod: its files, whose imports are read in turn (_named_by_scripts)
            yield from _kept([*_would_import_dotted(base, module), base.joinpath(*module.split("."), "__main__.py")],
                             root)
        for read in TASK_RUNNERS.get(os.path.basename(word), ()):
            yield from (p for folder in bases if (p := _inside(f"./{read}", folder, root, folders=True)) is not None)
        if module or (python and word == "-c"):
            # -c and -m put the folder Python starts in first on its path: what any import loads from there
            yield from _kept(would_import(base, import_names() | {module.split(".")[0]} - {""}), root)
        assignment = _ASSIGNMENT.match(word) is not None  # PYTHONPATH=./lib cmd: an env entry, folders too
        parts = [part for part in WORD_PARTS.split(word) if part]
        for part in parts if len(parts) > 1 else [word]:  # --out=./x: ./x alone
            if (p := _inside(part, base, root, folders=assignment, runs=_given_to_run(before, part))) is not None:
                yield p
            if "/" in part:  # what it lies in, as written (.venv/bin/python: a link leading out) and as resolved
                yield from _environments([Path(os.path.normpath(base / part)), p], base, root)
            elif not assignment:
                for program in _which(part, base, search):  # the file its link leads to, and what that lies in
                    yield from _kept([program], root or base)
                    yield from _environments([program, _resolved(program)], base, root or base)
            tails = [part[i + 1:] for i, c in enumerate(part) if c == "/"]
            for text, folder in [(part, b) for b in bases[1:]] + [(tail, b) for tail in tails for b in bases]:
                if os.path.isfile(os.path.join(folder, text)) and (
                        p := _inside(text, folder, root, folders=False)) is not None:
                    yield p


def _environments(paths: Iterable[Path | None], base: Path, root: Path | None) -> Iterator[Path]:
    """The virtual environment (a folder holding ``pyvenv.cfg``) or Node package (a folder in
    ``node_modules``) inside ``root`` that each of ``paths`` lies in, whole: ``.venv/bin/python`` reads its
    ``pyvenv.cfg`` and runs its site-packages' ``.pth`` files, and its ``bin/python`` is a link a command
    could replace; ``node_modules/.bin/tool`` leads into ``node_modules/tool``, whose files it loads.
    Without ``root``: below neither ``base`` nor a folder holding it."""
    for path in paths:
        for folder in path.parents if path is not None else ():
            if (root is not None and root not in folder.parents) or (
                    root is None and folder in (base, *base.parents)):
                break
            if os.path.isfile(folder / "pyvenv.cfg") or "node_modules" in (
                    folder.parent.name, folder.parent.parent.name if folder.parent.name.startswith("@") else ""):
                if (found := _resolved(folder)) is not None:
                    yield found
                break


def _which(word: str, base: Path, search: str) -> Iterator[Path]:
    """The programs the shell could run for the bare ``word``: each file so named in a folder of ``search``
    (a ``PATH``; a relative folder, or an empty entry, from ``base``), its link not followed. The shell runs
    the first executable one; any of them could become it."""
    if word and not word.startswith("-") and word.strip("|&;()<>"):
        for folder in search.split(os.pathsep):
            if os.path.isfile(path := os.path.join(base, folder or os.curdir, word)):  # a stat: most miss
                yield Path(os.path.normpath(path))


def _inside(word: str, base: Path, root: Path | None, *, folders: bool, runs: bool = False) -> Path | None:
    """``word`` as a path from ``base``, if it names a file (or a folder) strictly inside ``root``;
    with no ``root``, a relative ``word`` wherever it leads, but to ``base`` or a folder holding it.
    A missing file counts if the word holds a ``/`` or ``runs`` (:func:`_given_to_run`)."""
    if not word or "\x00" in word or "://" in word or word.startswith("-"):
        return None
    if root is None and word.startswith(("/", "~")):
        return None  # the machine's own files, not the folder's
    try:
        path = _resolved(base / Path(word).expanduser())
    except RuntimeError:  # ~nobody: no such user
        return None
    if path is None or (root not in path.parents if root is not None else path == base or path in base.parents):
        return None
    if os.path.isdir(path):
        return path if folders else None
    # a script that may be created later; not a word the shell expands ("$(pwd)/x": its tail is named)
    return path if os.path.exists(path) or (("/" in word or runs) and not {"$", "`"} & set(word)) else None


MAX_SCRIPT_BYTES = 256 * 1024
"""Of each file hooks and servers run, what is read for the files it names in turn."""


def _named_by_scripts(found: set[Path], start: Path, root: Path | None) -> set[Path]:
    """``found`` and every existing file a script in it names, and so on: what ``sh scripts/guard.sh`` runs
    when it sources ``scripts/lib.sh``.

    A script's words are split as a command line's (:func:`shell_words`),
    each resolved from the script's folder and from ``start``; of a word
    holding a ``/`` (``"$DIR/lib.sh"``), what follows each ``/`` from the
    script's folder too; and each word with the script's own suffix from
    its folder (``import helpers`` in a ``.py``, ``require('./util')`` in a
    ``.js``); each an existing file that can run (:func:`_code`) or that
    a program or an include is given, and, existing or not, what a
    script runs or reads by its place (:func:`_given_to_run`: make's
    ``-include local.mk``, package.json's ``node scripts/lint.js``). A
    script's language is its ``#!`` line's, else its suffix's
    (:func:`_language`). Not followed: a package an interpreter finds
    elsewhere, a name built at run time.
    """
    found = set(found)
    todo = sorted(found)
    import_roots: dict[Path, set[Path]] = {}
    searched: set[Path] = set()
    while todo:
        script = todo.pop()
        words, language = _script_words(script), _language(script)
        pairs = {(part, before) for before, word in zip(["", *words], words, strict=False)
                 for part in WORD_PARTS.split(word) if part}
        for part, before in pairs:
            tails = [(part[i + 1:], script.parent) for i, c in enumerate(part) if c == "/"]  # "$DIR/lib.sh"
            named = [(part, script.parent), (part, start), *(tails if {"$", "`"} & set(part) else [])]
            module = [(part + language, script.parent)] if language else []  # import helpers
            for name, base in [*named, *tails, *module]:
                if os.path.isfile(os.path.join(base, name)):  # a makefile's recipe: "@python3 x.py"
                    path = _inside(name, base, root, folders=False)
                    if path is None or not (_code(path, language) or _program(before.lstrip("@-+"))
                                            or before.lstrip("@-+") in _READS):
                        continue
                elif (name, base) not in named or not _given_to_run(before, name):
                    continue  # most words name nothing: no resolving
                elif (path := _inside(name, base, root, folders=False, runs=True)) is None:
                    continue
                if path not in found:
                    found.add(path)
                    todo.append(path)
        # What a module imports is found on the path of the script that runs (its folder first), not its own.
        folders = import_roots.setdefault(script, {script.parent, *([start] if os.path.isfile(
                                                                     script.parent / "__init__.py") else [])})
        if language == ".py" and os.path.isfile(script):
            for folder in folders - searched:  # what any import could load from there: once per folder
                searched.add(folder)
                new = _kept(would_import(folder, import_names()), root) - found
                found |= new
                todo += [p for p in new if p.suffix == ".py" and os.path.isfile(p)]
                import_roots.update((p, folders) for p in new)
        for path in (_imported(script, language, folders, root) | _required(script, language, root or start)) - found:
            found.add(path)
            if os.path.isfile(path):
                import_roots[path] = folders
                todo.append(path)
    return found


def _imported(script: Path, language: str, folders: set[Path], root: Path | None) -> set[Path]:
    """What a Python ``script``'s own imports would load, existing or not (:func:`_would_import_dotted`): an
    absolute one from ``folders``, the first on Python's path (the running script's, and the start folder
    too for a module of a package: ``python -m pkg.mod``); a relative one (``from .util import run``) from
    the script's package. ``from pkg import name`` loads ``pkg.name`` when it is a module: both are named.
    """
    if language != ".py":
        return set()
    try:
        tree = ast.parse(_script_text(script))
    except (SyntaxError, ValueError):
        return set()
    found: set[Path] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            dotted = [(folder, alias.name) for folder in folders for alias in node.names]
        elif isinstance(node, ast.ImportFrom):  # from pkg import util, from . import util, from ..pkg.mod import x
            if node.level - 1 > len(script.parent.parents):
                continue
            package = script.parent.parents[node.level - 2] if node.level > 1 else script.parent
            names = [".".join(filter(None, (node.module, alias.name))) for alias in node.names if alias.name != "*"]
            dotted = [(folder, name) for folder in (folders if not node.level else [package])
                      for name in [*([node.module] if node.module else []), *names]]
        else:
            continue
        for folder, name in dotted:
            found |= _kept(_would_import_dotted(folder, name), root)
    return found


@functools.cache
def import_names() -> frozenset[str]:
    """Every top-level name an import in a Python program could ask for: the standard library's
    (:data:`sys.stdlib_module_names`: ``subprocess`` imports ``selectors``), every installed package's
    (:func:`importlib.metadata.packages_distributions`: an optional dependency tried and missing), and the
    ``sitecustomize`` and ``usercustomize`` every start tries. Found once: a scan of the installed packages."""
    names = {*sys.stdlib_module_names, *importlib.metadata.packages_distributions(), "sitecustomize",
             "usercustomize"}
    return frozenset(name for name in names if name.isidentifier())


def would_import(folder: Path, names: Iterable[str]) -> Iterator[Path]:
    """What a Python process with ``folder`` first on its path could load from there for these top-level
    ``names``, existing or not: each ``name`` with every suffix the interpreter imports
    (:func:`importlib.machinery.all_suffixes`: source, bytecode, extension modules), ``name/__init__`` with
    each, or the whole ``name`` folder once it is a package (any module in it is code), and
    ``__pycache__``. A folder without an ``__init__`` is only a namespace portion, which a module found
    later on the path wins over, so it stays the agent's (a namespace package this program imported, whose
    portions are searched in order, is kept whole).
    """
    suffixes = importlib.machinery.all_suffixes()
    yield folder / "__pycache__"
    for name in names:
        package = folder / name
        inits = [package / f"__init__{suffix}" for suffix in suffixes]
        module = sys.modules.get(name)
        namespace = module is not None and getattr(module, "__file__", None) is None and hasattr(module, "__path__")
        if namespace or (os.path.isdir(package) and any(os.path.lexists(init) for init in inits)):
            yield package
            if os.path.isfile(package / "__init__.py"):
                yield package / "__init__.py"  # read for what it imports in turn
        else:
            yield from inits
        yield from (folder / f"{name}{suffix}" for suffix in suffixes)


def _would_import_dotted(folder: Path, dotted: str) -> Iterator[Path]:
    """What importing ``dotted`` (``pkg.sub.mod``) with ``folder`` first on Python's path could load there,
    existing or not: :func:`would_import` of each part in the folder of the parts before it (a namespace
    package's ``pkg/sub/mod.py`` as a regular one's)."""
    parts = dotted.split(".")
    for n, name in enumerate(parts):
        yield from would_import(folder.joinpath(*parts[:n]), [name])


def _kept(paths: Iterable[Path], root: Path | None) -> set[Path]:
    """Of lexical ``paths``, those strictly inside ``root`` (any, without one), resolved where they exist
    (a link leading elsewhere is followed): many that do not exist are each a ``stat``, not a resolve."""
    kept, prefix = set(), os.path.join(str(root or ""), "")
    for path in paths:
        if os.path.lexists(path) and (path := _resolved(path)) is None:  # type: ignore[assignment]
            continue
        if str(path).startswith(prefix):
            kept.add(path)
    return kept


_NODE_SCRIPTS = frozenset({".js", ".mjs", ".cjs"})
_NODE_IMPORT = re.compile(r"""(?:\brequire\s*\(\s*|\bimport\s*\(\s*|\bfrom\s+|\bimport\s+)(['"])([^'"\s]+)\1""")


_NODE_SUFFIXES = ("", ".js", ".json", ".node", ".mjs", ".cjs")
"""What Node tries after a relative ``require('./util')``'s path, in its order (then ``util/index.*`` and
``util/package.json``: the folder)."""


def _required(script: Path, language: str, root: Path) -> set[Path]:
    """What a Node script's imports would load, existing or not: a relative one (``require('./util')``)
    as each file Node tries (:data:`_NODE_SUFFIXES`, the bare name first) and the folder of that name, whole;
    a package as ``node_modules/<package>`` in each folder Node looks in, from the script's own up to ``root``
    (the workspace's, else the folder the run starts in).

    ``require('minimist')`` in ``hooks/check.js`` loads ``hooks/node_modules/minimist`` first when it is
    there: a package the agent put in a nearer folder, or a file it changed in the one meant, ran on the
    host. (A core module's name, ``fs``, is named too: a folder no one writes costs nothing.)
    """
    if language not in _NODE_SCRIPTS:
        return set()
    names = {m.group(2) for m in _NODE_IMPORT.finditer(_script_text(script))}
    relative = [Path(os.path.normpath(script.parent / name)) for name in names if name.startswith(("./", "../"))]
    found = _kept((Path(f"{path}{suffix}") for path in relative for suffix in _NODE_SUFFIXES), root)
    found |= {index for path in found if os.path.isdir(path) for index in (path / "index.js", path / "package.json")
              if os.path.isfile(index)}  # read in turn
    packages = {"/".join(name.split("/")[:2 if name.startswith("@") else 1]) for name in names
                if not name.startswith((".", "/", "node:"))}
    packages = {p for p in packages if p and ".." not in p.split("/")}
    folders = [f for f in (script.parent, *script.parent.parents) if f == root or root in f.parents]
    return found | {folder / "node_modules" / package for folder in folders for package in packages}


_READS = frozenset({"include", "sinclude", ".", "source"})
"""Words that read the file they are given as more of the script: make's ``include`` (``-include``), the
shell's ``.`` and ``source``."""


def _given_to_run(before: str, word: str) -> bool:
    """Whether ``word``, after ``before``, names by its place a file run or read as code, existing or not:
    what an include reads (``-include local.mk``, ``. ./env.sh``), or the first file a program is given
    if it reads as a file's name (``node scripts/lint.js``, ``sh local.sh``; not ``echo ok``, ``cargo build``).
    Make's ``@``, ``-`` and ``+`` recipe prefixes are no part of the program's name."""
    before = before.lstrip("@-+")
    return before in _READS or (("/" in word or bool(os.path.splitext(word)[1])) and _program(before))

_DATA: dict[str, Callable[[str], Any]] = {".json": json.loads, ".toml": tomllib.loads, ".yaml": yaml.safe_load,
                                          ".yml": yaml.safe_load}


def _script_words(script: Path) -> list[str]:
    """A script's words (:func:`shell_words`); of a JSON, TOML or YAML file (``package.json``'s scripts,
    ``.pre-commit-config.yaml``'s entries), each string value's, as a command line of its own."""
    text = _script_text(script)
    if (load := _DATA.get(script.suffix)) is None:
        return shell_words(text)
    try:
        return [word for value in _strings(load(text), set()) for word in (*shell_words(value), ";")]
    except (ValueError, yaml.YAMLError, RecursionError):
        return shell_words(text)


def _strings(data: Any, seen: set[int]) -> Iterator[str]:
    """Every string in ``data``; a list or mapping met again (a YAML alias) is read once."""
    if isinstance(data, str):
        yield data
    elif isinstance(data, (Mapping, list)) and id(data) not in seen:
        seen.add(id(data))
        for value in data.values() if isinstance(data, Mapping) else data:
            yield from _strings(value, seen)


def _program(word: str) -> bool:
    """Whether ``word`` names a program (``python3``, ``node``, ``/usr/bin/env``): the file it is given
    first is what it runs (``python3 tools/check.py``), whatever that file's suffix or mode."""
    return bool(word) and not word.startswith("-") and _on_path(word, os.environ.get("PATH")) is not None


@functools.lru_cache(maxsize=4096)
def _on_path(word: str, search: str | None) -> str | None:
    """:func:`shutil.which`, once per word of a long script."""
    return shutil.which(word, path=search)


def _code(path: Path, language: str) -> bool:
    """Whether a file a script in ``language`` (:func:`_language`) names can run: of its language,
    executable, or a ``#!`` script.

    What else a script names is its work (``grep x README.md``), as a folder a hook names is."""
    return bool(language and path.suffix == language) or os.access(path, os.X_OK) or (
        read_regular(path, 2) == b"#!")


def _language(path: Path) -> str:
    """The suffix of the language a script is written in: its ``#!`` line's interpreter's
    (``#!/usr/bin/env python3``, ``#!.venv/bin/python3.11 -u``: ``.py``; ``node``: ``.js``), else its own.
    ``./hooks/guard`` runs as Python, its imports and its folder's modules with it."""
    line = read_regular(path, 256).partition(b"\n")[0]
    if line.startswith(b"#!"):
        words = [os.path.basename(w) for w in line[2:].decode("utf-8", "replace").split()
                 if not w.startswith("-") and "=" not in w]  # env -S, env NAME=value
        program = next((w for w in words if w != "env"), "")
        if _PYTHON.fullmatch(program):
            return ".py"
        if program in ("node", "nodejs"):
            return ".js"
    return path.suffix


def _script_text(path: Path) -> str:
    """The first :data:`MAX_SCRIPT_BYTES` bytes of a regular file as text; ``""`` for a program (a NUL byte)."""
    data = read_regular(path, MAX_SCRIPT_BYTES)
    return "" if b"\0" in data else data.decode("utf-8", "replace")


def _resolved(path: Path) -> Path | None:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return None
