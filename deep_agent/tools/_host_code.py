"""What hooks and MCP servers run: their commands, and the files those name; and what Python could import.

Read by folder trust (:mod:`deep_agent.cli._folder_trust`) and the protected set (:mod:`deep_agent.tools._protected`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.machinery
import importlib.metadata
import os
import re
import secrets
import shlex
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any


class _Lexer(shlex.shlex):
    """``sh``'s words: a ``#`` starts a comment only where a word would start (``x=a#b`` is one word)."""

    state: str | None  # shlex's: " " between words

    @property
    def commenters(self) -> str:
        return "#" if self.state == " " else ""

    @commenters.setter
    def commenters(self, value: str) -> None:
        pass


def shell_words(command: str) -> list[str]:
    """``command``'s words as ``sh`` splits them, each operator its own (``);``: two), a backquoted command read as
    ``$(...)`` is, its backquotes paired as the shell pairs them and, where that differs, in the order they come (a
    quote misread, in a comment say, reads more, never less); if unparsable, by whitespace."""
    command = command.replace("\\\n", "")
    texts = dict.fromkeys([_backquotes(command), re.sub(r"`([^`]*)`", r"$(\1)", command)])
    return [word for n, text in enumerate(texts) for word in [";"][:n] + _words(text)]


def _backquotes(text: str) -> str:
    """``text`` with each backquote outside single quotes and unescaped as ``$(`` or ``)``, in turn."""
    out, quote, opened = [], "", False
    for part in re.split(r"(\\.|['\"`])", text):
        if quote == "'":
            quote = "" if part in ("'", "\\'") else quote
        elif part in ("'", '"'):
            quote = "" if quote == part else quote or part
        elif part == "`":
            part, opened = "$(" if not opened else ")", not opened
        out.append(part)
    return "".join(out)


def _words(command: str) -> list[str]:
    lexer = _Lexer(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # an unclosed quote: the shell would refuse it too, but look at its words anyway
        return command.split()
    return [part for word in words
            for part in (_OPERATOR.findall(word) if word and set(word) <= set(lexer.punctuation_chars) else [word])]


_OPERATOR = re.compile(r"&&|\|\||;;|\|&|[<>]&|&>|>>|<<|[();<>|&]")  # sh's operators in a run of them (`);`)

# Where a word is split again into the paths it may hold: --out=./x, PYTHONPATH=a:b, a quoted "sh x".
WORD_PARTS = re.compile(rf"[\s={re.escape(os.pathsep)}]+")


LIMIT = 1 << 20
"""The most of a command text the reader reads; a longer one holds the folder it runs in whole (:data:`WHOLE`)."""
WHOLE = f"whole-{secrets.token_hex(16)}"  # a command of its own: "hold the folder I run in"; no checkout can say it
MAX_WORK = 1024
"""The most (simple command, folder it may run in) pairs the reader reads in one text and what it runs; past it, the
text's folder is held whole (:data:`WHOLE`): ten ``(cd svc && make lint)`` lines may run in a thousand folders."""


def read_text(path: Path) -> str:
    """The text of ``path`` (:func:`read_regular`), or :data:`WHOLE` past :data:`LIMIT`: what it runs goes unread."""
    data = read_regular(path, LIMIT + 1)
    return WHOLE if len(data) > LIMIT else data.decode("utf-8", "replace")


def read_regular(path: Path, limit: int) -> bytes:
    """The first ``limit`` bytes of ``path`` if it is a regular file (checked once open: a pipe never blocks)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            return os.read(fd, limit) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
        finally:
            os.close(fd)
    return b""


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


def _servers(value: Any) -> Iterator[tuple[str, Mapping[str, Any], list[str], Mapping[str, Any]]]:
    """``(name, config, args, env)`` of every MCP server of a normalised ``mcp_config``."""
    for name, config in value.items() if isinstance(value, Mapping) else ():
        if isinstance(config, Mapping):
            yield (str(name), config, [str(a) for a in config["args"]] if isinstance(config.get("args"), list) else [],
                   config["env"] if isinstance(config.get("env"), Mapping) else {})


def what_would_run(spec: Any) -> list[str]:
    """What an agent file's hooks and MCP servers would run, whole (raw text): commands, env, cwd, URLs."""
    found = [f"hook{f' ({event})' if event else ''}: {command}"
             for event, command in _hook_commands(getattr(spec, "hooks", None) or {})]
    for name, server, args, env in _servers(getattr(spec, "mcp_config", None) or {}):
        if isinstance(server.get("command"), str):
            found.append(f"MCP server {name}: {shlex.join([server['command'], *args])}")
            found += [f"  env {key}={value}" for key, value in env.items()]
            if server.get("cwd"):
                found.append(f"  cwd {server['cwd']}")
        elif isinstance(server.get("url"), str):
            found.append(f"MCP server {name}: connects to {server['url']}")
    return found


def files_run_by(spec: Any, folder: Path, *, outside: bool = False) -> list[Path]:
    """What in ``folder`` an agent definition's hooks and MCP servers name (:func:`command_files`, an ``env`` value's
    folders too), sorted; with ``outside``, also what a relative word names outside ``folder``, no absolute path."""
    start = folder.resolve()
    root = None if outside else start
    found = {p for _, command in _hook_commands(getattr(spec, "hooks", None) or {})
             for p in command_files(shell_words(script_text(command)), start, root)}
    for _, server, args, env in _servers(getattr(spec, "mcp_config", None) or {}):
        base = _resolved(start / str(server["cwd"])) if server.get("cwd") else start
        if isinstance(server.get("command"), str) and base is not None:
            found |= command_files([str(server["command"]), *args], base, root)
            found.update(p for value in env.values() for w in WORD_PARTS.split(str(value))
                         if (p := _inside(w, base, root, folders=True)) is not None)
    return sorted(found)


def command_files(words: list[str], base: Path, root: Path | None, *, folders: bool = False) -> set[Path]:
    """What a shell command's ``words`` name from ``base``, as docs/cli.md says (an existing file, or one to come if
    the word holds a ``/`` or is a program's first argument with a suffix; a folder only in a ``NAME=value`` word,
    or any with ``folders``; the folder a computed name is computed in, whole); in a python's start folder, each
    existing module any word of the texts read names."""
    found: set[Path] = set()
    commands = list(simple_commands(words, base))
    said = {name for command, _ in commands for word in command if "/" not in word  # a path's parts name no module
            for name in re.findall(r"[A-Za-z_]\w*", word)}
    top, starting = root or base, set()
    for command, cwd in commands:
        if WHOLE in command and (cwd == top or top in cwd.parents):
            found.add(cwd)
        program = [word for word in command if not _ASSIGNMENT.match(word)][:1]  # `bash guard.sh`: its next word
        for n, word in enumerate(command):
            parts = [part for part in WORD_PARTS.split(word) if part]
            env = _KEY.match(word) is not None  # PYTHONPATH=./lib cmd, git -c core.hooksPath=x: folders too
            # tools/*.sh, tools/{a,b}.sh, ${V:-tools/x.sh}, open('tools/x.py'): the folder the name is computed in.
            # At the top ("./$f", ./*.hook) no sandbox can hold a pattern's files to come: the top whole.
            found.update(p for part in _LITERAL.findall(_defaults(word)) if _COMPUTED.search(word) and "/" in part
                         for folder in [part if part.endswith("/") else os.path.dirname(part)]
                         if (p := _inside(folder, cwd, root, folders=True, named=True)
                             or (top if _resolved(cwd / folder) == top else None)))
            script = n > 0 and (command[n - 1:n] == program and bool(Path(word).suffix)  # missing yet or not
                                or program[:1] == command[:1] and command[0] in _INCLUDES)
            found.update(p for part in (parts if len(parts) > 1 else [word])  # PYTHONSTARTUP=x.py: a file to come
                         if (p := _inside(part, cwd, root, folders=env or folders,
                                          named=script or (env and part != parts[0] and bool(_FILE.search(part))))))
        for kind, folder, module in starts(command, cwd):
            found.update(p for name in ("__pycache__", module, *(module + s for s in _SUFFIXES))
                         if kind != "node" and module.isidentifier()
                         and (p := _inside(name, folder, root, folders=True, named=True)))
            starting |= {folder} if module == "*" else set()
    # A python whose code the reader does not see (a heredoc, stdin, "$1") may import any name the texts say.
    for folder in starting:
        with contextlib.suppress(OSError):
            found.update(p for entry in os.listdir(folder) if (stem := entry.partition(".")[0]) in said
                         and entry[len(stem):] in ("", *_SUFFIXES)
                         and (p := _inside(entry, folder, root, folders=True)))
    return found


def script_text(text: str) -> str:
    """A script as one command, each line a command of its own (a ``cd`` or an ``export`` holds on the next line); a
    heredoc's text read as commands in a subshell (a shell may run it, and its ``cd`` never moves the script's)."""
    lines: list[str] = []
    end = None
    # A line ending in a backslash goes on, but a comment's ends with it (`# see \` hides no command).
    for line in re.sub(r"^([ \t]*[^#\s].*)\\\n", r"\1", text, flags=re.MULTILINE).splitlines():
        if end is not None and line.strip() == end:
            lines.append(")")
            end = None
            continue
        lines.append(line)
        if end is None and (heredoc := _HEREDOC.search(line)):
            end = heredoc.group(1)
            lines.append("(")
    return "\n;\n".join(lines)  # a comment ends its line


_HEREDOC = re.compile(r"(?<!<)<<-?\s*\\?['\"]?(\w+)")


def own_path(text: str, path: Path | None) -> str:
    """A script's ``text`` with ``$0`` as its ``path`` and each ``$(dirname P)`` as ``P/..`` (``cd "$(dirname "$0")"``:
    its own folder); a sourced one's (no ``path``) ``$0`` is its caller's, the script read last."""
    own = shlex.quote(str(path)) if path else f"${{{_SCRIPT}}}"
    text = (f"{_SCRIPT}={own}\n" if path else "") + _ZERO.sub(own, text)
    while (parent := _DIRNAME.sub(lambda m: f"{m[1] or m[2]}/..", text)) != text:  # dirname "$(dirname "$0")"
        text = parent
    return text


def simple_commands(words: list[str], base: Path) -> Iterator[tuple[list[str], Path]]:
    """Each simple command of ``words`` (with the ``NAME=value`` words it and an ``export`` set; ``$PWD`` its folder;
    no redirection) and each folder it may run in from ``base``: a ``cd DIR`` adds ``DIR`` (missing yet too; one
    it cannot evaluate, each folder a word read names), for it may fail, sit in a branch or a function never
    called. Every command text it runs is read (a word holding a space, a script in ``base``, its ``#!`` line) in a
    subshell in its folder, one sourced in place."""
    top, read = base, set[tuple[Path, Path]]()
    bases = dict.fromkeys([base])  # an ordered set: a cd's folder is looked up in it for every folder so far
    command: list[str] = []
    exported: list[str] = []
    subshells: list[list[Path]] = []  # the folders before a `( ... )`: a script read in its own gives them back
    values: dict[str, str | None] = {}
    todo = [";", *reversed(words)]  # a stack: what a command runs is read next
    named = set(words)  # the words of every text read: where a cd it cannot evaluate may go
    work = MAX_WORK  # (command, folder) pairs left: each cd may double the folders, so a text's read is bounded
    while todo:
        word = todo.pop()
        if word in _REDIRECTIONS:  # `pushd sub 2>/dev/null`: the 2 and the target are no words of the command
            if command and command[-1].isdigit():
                command.pop()
            if todo and todo[-1] not in _OPERATORS:
                target = todo.pop()
                if word == "<":  # `while read f; do "./$f"; done < hooks.txt`: a text it reads, each line a name
                    command += [os.path.join(".", target), *_lines(target, bases, top)]
            continue
        if word not in _OPERATORS:
            command.append(word)
            continue
        if command[:1] == [_AT]:  # the folder a script or a command text it runs is read in
            bases, command = dict.fromkeys([Path(command[1])]), []
            continue
        if command:
            program = [w for w in command if not _ASSIGNMENT.match(w)]
            verb = next((n for n, w in enumerate(program) if w not in _PREFIXES), len(program))
            name = program[verb:verb + 1]
            # env -C DIR / --chdir=DIR runs its command there; cd and pushd add the folder of the commands after it.
            chdir = next((w.partition("=")[2] or (program + [""])[n + 1] for n, w in enumerate(program)
                          if name == ["env"] and (w in ("-C", "--chdir") or w.startswith("--chdir="))), None)
            cd = name in (["cd"], ["pushd"]) and len(program) > verb + 1
            target = chdir or (program[-1] if cd else "")
            inline: list[str] = []
            work -= len(bases)
            if work < 0:  # past the bound: the folder the text runs in held whole, as a text past LIMIT is
                yield [WHOLE], top
                return
            for folder in list(bases):
                goes = _expand(target, folder, top, values) if not target.startswith(("-", "~")) else ""
                if cd and {"$", "`"} & set(goes):  # for d in a b; do cd "$d": to any folder of the top the text names
                    moved = [m for w in named if (m := _resolved(folder / w)) and os.path.isdir(m)
                             and top in (m, *m.parents)]
                else:
                    moved = [m for m in [_resolved(folder / goes)] if goes and m and not {"$", "`"} & set(goes)
                             and (os.path.isdir(m) or not os.path.lexists(m))]
                cwd = moved[0] if chdir and moved else folder
                yield [_expand(w, cwd, top, values) for w in [*exported, *command]], cwd
                bases.update(dict.fromkeys(moved if cd else []))
                inline += _runs([_expand(w, cwd, top, values) for w in command], cwd, top, read, named)
            if name == ["export"]:
                exported += [w for w in command if _ASSIGNMENT.match(w)]
            if not program or name == ["export"]:  # MOD=x; python3 -m "$MOD": a variable set is read as its value
                for var, _, value in (w.partition("=") for w in command if _ASSIGNMENT.match(w)):
                    # Set twice to two values: which one holds is unknown; a script's own path is the one read last.
                    value = _expand(value, top, top, values)
                    values[var] = value if values.get(var, value) == value or var == _SCRIPT else None
            command = []
            if inline:  # read before the word that ended the command: `(cd app && sh ../lint.sh)` reads it in app
                todo += [word, ";", *reversed(inline)]
                named.update(inline)
                continue
        # Folders and exports only add up: a subshell's cd may be read outside it, never one dropped early (a case
        # pattern's `)`, a heredoc's text) nor after it.
        if word == "(":
            subshells.append(list(bases))
        elif word == ")" and subshells:
            bases = dict.fromkeys([*subshells.pop(), *bases])
        command = []


_ZERO = re.compile(r"\$\{?0\}?(?!\w)")  # the script's own path
_DIRNAME = re.compile(r"\$\(\s*dirname\s+(?:--\s+)?\"?([^\s\"'`()]+)\"?\s*\)"
                      r"|`dirname\s+(?:--\s+)?\"?([^\s\"'`()]+)\"?`")
_SCRIPT = f"_{secrets.token_hex(16)}"  # a variable: the path of the script a sourced text's $0 names
_IMPORTS = re.compile(r"(?:^|[;\s])(?:from|import)\s+([A-Za-z_]\w*)")
_AT = f"\x00in-{secrets.token_hex(16)}"  # unguessable: no text a checkout holds can move the reader's folder
_PREFIXES = frozenset({"then", "else", "elif", "do", "if", "while", "until", "command", "builtin", "time"})
_WRAPPERS = frozenset({"env", "exec", "nice", "nohup", "timeout", "ionice", "flock", "xargs", "sudo", "script"})


def _lines(name: str, folders: Iterable[Path], top: Path) -> list[str]:
    """The lines of the file ``name`` in each of ``folders`` (inside ``top``), each a word (a path from there: a file
    to come too); past :data:`MAX_WORK` of them, :data:`WHOLE`."""
    lines = [line if " " in line else os.path.join(".", line) for folder in folders
             if (path := _resolved(folder / name)) and top in path.parents
             for line in map(str.strip, read_text(path).splitlines()) if line]
    return lines if len(lines) <= MAX_WORK else [WHOLE]


def _runs(command: list[str], cwd: Path, top: Path, read: set[tuple[Path, Path]], named: set[str]) -> list[str]:
    """The command text a simple command runs beside its own words, each once a folder (see
    :func:`simple_commands`): a script, and what a runner reads (:data:`_RUNNERS`). A folder whose files it may run
    by a name the reader does not see is held whole: a shell's given a computed script with no folder of its own
    (``sh "$1"``, ``sh *.sh``, ``find -exec sh {}``), a runner's that runs a folder. An interpreter whose code it
    cannot see (no script: stdin, ``xargs sh``; ``python3 -m "$1"``) may run any file a word of the text names: each
    is read as a script there; a shell's, any folder a word names, whole (``ls tools | xargs sh``)."""
    out: list[str] = []
    unseen, stdin = any(module == "*" for _, _, module in starts(command, cwd)), False
    shell = ""  # after a shell, `.` or `source`: its first operand is a script ("s"), after -c a command ("c")
    whole = set()
    verb = next((n for n, word in enumerate(command) if not _ASSIGNMENT.match(word)), 0)
    runner = next((n for n, word in enumerate(command) if _name(word) in _RUNNERS  # a program, not `layout node`
                   and (n == verb or command[n - 1] in _PREFIXES or _name(command[verb]) in _WRAPPERS)), len(command))
    reads = _RUNNERS.get(_name(command[runner]) if runner < len(command) else "", ())
    if runner < len(command):  # from its folder (npm --prefix sub, make -C sub: any folder a word names too)
        args = command[runner + 1:]
        given = [m for w in args if (m := _resolved(cwd / w.rpartition("=")[2])) and os.path.isdir(m)]
        if reads == ("",):  # ruby x.rb, run-parts d: the folder, whole
            script = next((w for w in args if not w.startswith("-")), "")
            own = _resolved(cwd / script) or cwd
            whole.update(given + [own.parent][:bool(Path(script).suffix) and not os.path.isdir(own)] or [cwd])
        out += [w for folder in [cwd, *given] for name in reads if name[:1] not in ("", "-")
                for w in ("(", _AT, str(folder), ";", str(folder / name), ")", ";")]
    for n, word in enumerate(command):
        if any(c.isspace() for c in word) and (inner := shell_words(word)) != [word]:  # sh -c '...', alias r='...'
            out += ["(", _AT, str(cwd), ";", *inner, ")", ";"]
        evaluated = _defaults(word)  # exec "${DIR:-scripts}/pre.sh": scripts/pre.sh
        path = _resolved(cwd / evaluated) if not word.startswith("-") else None
        sourced = shell and command[n - 1] in (".", "source")
        key = (path, top if sourced else cwd)  # a sourced one is read in place once: for every folder at once
        text = read_text(path) if path and top in path.parents and key not in read else ""
        given_file = n > runner and command[n - 1] in reads or n > verb and command[verb] in _INCLUDES  # make -f x
        run = shell or given_file or command[n - 1:n] in (["-exec"], ["-execdir"])  # find -exec {}: computed
        computed = _COMPUTED.search(evaluated) if run and not word.startswith("-") else None
        if computed and "/" not in evaluated[:computed.start()] and not any(c.isspace() for c in word):
            whole.add(cwd)  # sh "$f": no folder of its own (sh tools/*.sh: tools, as command_files says)
        if path is not None and text and (n == verb or given_file or shell or text.startswith("#!")):
            read.add((path, key[1]))
            first = text.partition("\n")[0]
            interpreter = shell_words(first[2:]) if first.startswith("#!") and not sourced else []
            shell_script = not interpreter or any(_SHELL.fullmatch(_name(w)) for w in interpreter)
            json = path.suffix == ".json" and text != WHOLE  # package.json: each string a command run in its folder
            text = "\n".join(re.findall(r'"((?:[^"\\]|\\.)*)"', text)) if json else text
            text = own_path(text, None if sourced else path)
            body = shell_words(script_text(text)) if shell_script else []
            out += [*body, ";"] if sourced else ["(", _AT, str(cwd), ";", *interpreter, str(path), ";", *body, ")",
                                                 ";"]
        is_shell = not word.startswith("-") and (bool(_SHELL.fullmatch(_name(word))) or (  # not `ruff check .`
            word in (".", "source") and (n == verb or command[n - 1] in _PREFIXES)))
        shell = "s" if is_shell else "c" if shell and re.fullmatch(r"-\w*c\w*", word) else shell * word.startswith("-")
        stdin |= shell == "s" and n == len(command) - 1  # no script (nor -c): stdin, or what xargs passes
    for folder in sorted(f for f in whole if (f, Path(WHOLE)) not in read):  # once a folder (a relative mark: no file)
        read.add((folder, Path(WHOLE)))
        out += ["(", _AT, str(folder), ";", WHOLE, ")", ";"]
    if not (unseen or stdin) or (cwd, Path(str(stdin))) in read:  # once a folder
        return out
    read.add((cwd, Path(str(stdin))))
    paths = {w: p for w in sorted(named) if (p := _resolved(cwd / w)) and top in p.parents}
    files = [part for w, p in paths.items() if os.path.isfile(p) for part in (w, ";")]
    folders = [w for p in paths.values() if stdin and os.path.isdir(p) for w in ("(", _AT, str(p), ";", WHOLE, ")")]
    if stdin and not folders and "xargs" in map(_name, command):  # ls | xargs sh: the names of its own folder
        folders = ["(", _AT, str(cwd), ";", WHOLE, ")"]
    return [*out, "(", _AT, str(cwd), ";", *files, *folders, ")", ";"]


def starts(command: list[str], cwd: Path) -> Iterator[tuple[str, Path, str]]:
    """What a simple command started from ``cwd`` loads from a folder: ``(its python word, the folder first on its
    import path, -m's top module, "", or "*" where its code is unseen: stdin, ``"$1"``)`` or ``("node", its
    folder, "")``, as docs/cli.md says."""
    # No table says which word past what runs it (env -u sh, nice -n 5, uv run...) is the program: each word naming
    # one is read as one (more, never less); env -S's value is words; a PYTHONPATH puts its folders first.
    words = [part for n, word in enumerate(command) for part in _split_string(command[n - 1:n], word)]
    for at in (n for n, word in enumerate(words) if _name(word) in _NODE or _python(word)):
        path = next((w for w in reversed(words[:at]) if w.startswith("PYTHONPATH=")), "=").partition("=")[2]
        yield from _started(words[at:], cwd, [(cwd / e).resolve() for e in path.split(":") if e])


def _split_string(before: list[str], word: str) -> list[str]:
    """``word`` as env's ``-S``/``--split-string`` splits it: after the flag, or joined (``--split-string=a b``,
    ``-S'a b'``: a space in it, so python's ``-Sm`` stays one word)."""
    if before in (["-S"], ["--split-string"]):
        return shell_words(word)
    for flag in ("--split-string=", "-S"):
        if word.startswith(flag) and (flag != "-S" or " " in word):
            return shell_words(word[len(flag):])
    return [word]


def _started(words: list[str], cwd: Path, paths: list[Path]) -> Iterator[tuple[str, Path, str]]:
    if "/" in words[0] and not words[0].startswith(("/", "~", "$")):  # .venv/bin/python: from the command's cwd
        words = [str(cwd / words[0]), *words[1:]]
    if _python(words[0]):
        yield from ((words[0], folder, "") for folder in paths)
    if _name(words[0]) in _NODE:  # node's folder is its script's (a package runner's, its cwd)
        script = next((w for w in words[1:] if not w.startswith("-")), "") if _name(words[0]) == "node" else ""
        yield "node", (_resolved(cwd / script) or cwd).parent if Path(script).suffix else cwd, ""
        # npm --prefix sub, yarn --cwd sub: a package runner runs from any folder a word names.
        yield from (("node", m, "") for w in words[1:]
                    if (m := _resolved(cwd / w.rpartition("=")[2])) and os.path.isdir(m))
    elif _python(words[0]):
        args = iter(words[1:])
        for word in args:
            if word == "--" or word == "-" or not word.startswith("-"):  # a script, or stdin
                script = next(args, "-") if word == "--" else word
                if script == "-" or {"$", "`"} & set(script) or (folder := _resolved(cwd / script)) is None:
                    break  # its code unseen: stdin, "$1"
                # A folder (or a zip) run as a script starts from itself, with its __main__.
                yield (words[0], folder, "__main__") if os.path.isdir(folder) else (words[0], folder.parent, "")
                return
            if word == "--check-hash-based-pycs":  # the one long option that takes a value
                next(args, "")
            for n, flag in enumerate(word[1:] if not word.startswith("--") else ""):
                if flag in "IP":  # isolated, or safe path: no folder of its own on the path
                    return
                if flag in "mcWX":  # the rest of the word, or the next one, is its value
                    value = word[n + 2:] or next(args, "")
                    if flag in "mc":  # -c's code: each top module it imports is as -m's; "$1", xargs': unseen
                        for module in _IMPORTS.findall(value) or [""] if flag == "c" else [value.partition(".")[0]]:
                            yield words[0], cwd, module if value and not {"$", "`"} & set(value) else "*"
                        return
                    break
        yield words[0], cwd, "*"  # its code from stdin: unseen


_PYTHON = re.compile(r"(\w*_)?(python|pypy)[0-9.]*(-dbg)?", re.IGNORECASE)  # "$INSTALL_PYTHON" too
_SHELL = re.compile(r"(ba|da|z|k)?sh")
_SUFFIXES = tuple(importlib.machinery.all_suffixes())
_NODE = frozenset({"node", "npx", "npm", "pnpm", "pnpx", "yarn", "bunx", "bun"})  # each runs node_modules' code
_RUNNERS = {**dict.fromkeys(_NODE - {"node"}, ("package.json", ".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs")),
           **dict.fromkeys(("make", "gmake"), ("Makefile", "makefile", "GNUmakefile", "-f")),
           "just": ("justfile", "Justfile", ".justfile", "-f", "--justfile"), "ssh": ("-F",),
           **dict.fromkeys(("node", "ruby", "perl", "deno", "run-parts"), ("",))}
"""A runner -> the files of each folder it runs from that it reads, and the options whose file it reads (``make -f
x.mk``, ``ssh -F cfg``), each read as a script; ``""``: a language the reader does not parse, or a folder run whole:
its script's folder (or the folder it is given) is held whole."""


_INCLUDES = frozenset({"include", "-include", "sinclude"})  # a Makefile's: each argument a Makefile it reads


def _name(word: str) -> str:
    return Path(word).name.strip("${}") if not _ASSIGNMENT.match(word) else ""


def _python(word: str) -> bool:
    """Whether ``word`` may name a python: by its name, or an expansion (``"$PY"``: any program)."""
    return bool(_PYTHON.fullmatch(_name(word))) or (word[:1] in "$`" and not _ASSIGNMENT.match(word))


_OPERATORS = frozenset({"&&", "||", ";", ";;", "|", "&", "|&", "(", ")", "!", "{", "}"})
"""The words after which a shell command starts."""
_REDIRECTIONS = frozenset({"<", ">", ">>", "<<", "<&", ">&", "&>"})
_FILE = re.compile(r"\w\.[A-Za-z]\w*$")  # a name with a suffix: x.py, .envrc.local
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_KEY = re.compile(r"[A-Za-z_][\w.-]*=")  # a variable's, or a config key's value (git -c core.hooksPath=x)
_COMPUTED = re.compile(r"[$`*?\[{(]")  # a name the reader does not evaluate: an expansion, a glob, another language's
_LITERAL = re.compile(r"[\w./~@%+][\w./~@%+-]*")  # the literal runs of such a word
_PWD = re.compile(r"\$\{?PWD\}?|\$\(pwd\)")  # the shell's own folder, as a word names it
_TOP = re.compile(r"\$\(git rev-parse --show-toplevel\)")
_VARIABLE = re.compile(r"\$\{?([A-Za-z_]\w*)\}?")
_DEFAULT = re.compile(r"\$\{[A-Za-z_]\w*:?[-=]([^{}$]*)\}")


def _expand(word: str, cwd: Path, top: Path, values: dict[str, str | None]) -> str:
    """``word`` with the shell's folder, the working tree's top and the variables a command set before it."""
    word = _TOP.sub(str(top), _PWD.sub(str(cwd), word))
    return _VARIABLE.sub(lambda found: values.get(found.group(1)) or (
        os.path.expanduser("~") if found.group(1) == "HOME" else found.group(0)), word)


def _defaults(word: str) -> str:
    """``word`` with each ``${V:-default}`` (``-``, ``:=``, ``=``) as its default: a variable that may be unset."""
    return _DEFAULT.sub(lambda found: found.group(1), word)


STDLIB_TRIES = frozenset({"org", "java", "docutils", "vms_lib", "_winreg", "win32api", "win32con", "win32evtlogutil"})
"""Names the standard library's own modules import when they can (``copy`` and ``pickle`` try Jython's
``org.python.core`` on 3.11) that are neither standard nor installed: found by a scan of its sources."""


@functools.cache
def import_names() -> frozenset[str]:
    """Every top-level name an import could ask for: the standard library's (:data:`STDLIB_TRIES` too), every
    installed package's (an optional dependency tried and missing), ``sitecustomize``/``usercustomize``."""
    names = {*sys.stdlib_module_names, *importlib.metadata.packages_distributions(), "sitecustomize", "usercustomize",
             *STDLIB_TRIES}
    return frozenset(name for name in names if name.isidentifier())


def would_import(folder: Path, names: Iterable[str]) -> Iterator[Path]:
    """What a python with ``folder`` first on its path could load there for ``names``, existing or not: every form, or
    a package whole (a namespace portion, no ``__init__``, a later module wins: the agent's, unless imported as one)."""
    suffixes = importlib.machinery.all_suffixes()
    yield folder / "__pycache__"
    for name in names:
        package = folder / name
        inits = [package / f"__init__{suffix}" for suffix in suffixes]
        module = sys.modules.get(name)
        # A namespace package this program imported, or a name nothing installs (a portion of it is the only one).
        namespace = name in STDLIB_TRIES or (module is not None and getattr(module, "__file__", None) is None
                                             and hasattr(module, "__path__"))
        if namespace or (os.path.isdir(package) and any(os.path.lexists(init) for init in inits)):
            yield package
            if os.path.isfile(package / "__init__.py"):
                yield package / "__init__.py"  # read for what it imports in turn
        else:
            yield from inits
        yield from (folder / f"{name}{suffix}" for suffix in suffixes)


def _inside(word: str, base: Path, root: Path | None, *, folders: bool, named: bool = False) -> Path | None:
    """``word`` as a path from ``base`` if it names a file (or a folder) strictly inside ``root`` (no ``root``: a
    relative word anywhere but ``base`` and above); a missing file if the word holds a ``/`` or is ``named``."""
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
    return path if os.path.exists(path) or (("/" in word or named) and not {"$", "`"} & set(word)) else None


def _resolved(path: Path) -> Path | None:
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL
        return None
