"""What the user's own tools start in the workspace, outside the sandbox, loads nothing a command made.

Git runs its config's commands and its hooks from the working tree's top; a python started there puts
that folder (a script's, for ``python tools/x.py``) first on its import path, and imports far more than
the module it was asked for: before, a command wrote ``argparse.py`` (``json.tool`` imports it) or
``pre_commit.py`` at the top, and the user's next ``git diff`` or ``git commit`` ran it on the host.
Likewise ``npx`` runs the top's ``node_modules/.bin``, ``core.hooksPath = githooks`` names a folder
before it exists, and direnv loads what an allowed ``.envrc`` names (``dotenv``: ``.env``) on ``cd``.
Each route below: the file is refused to ``Write`` and cannot be planted by ``Bash`` (refused, or set
aside before anything runs it).
"""

from __future__ import annotations

import os
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deep_agent.tools._protected import Protected

PRE_COMMIT = """#!/usr/bin/env bash
INSTALL_PYTHON=/usr/bin/python3
ARGS=(hook-impl --config=.pre-commit-config.yaml --hook-type=pre-commit)
if [ -x "$INSTALL_PYTHON" ]; then exec "$INSTALL_PYTHON" -mpre_commit "${ARGS[@]}"; fi
"""

HOOK_LOOP = '#!/bin/sh\nfor f in $(git diff --cached --name-only); do python3 -m json.tool "$f"; done\n'
PYTHON_HOOK = {"scripts/pre-commit.py": "#!/usr/bin/env python3\nimport subprocess\n",
               ".git/hooks/pre-commit": "-> ../../scripts/pre-commit.py"}  # the common link to a tracked script

ROUTES = [  # (git config of the repository, files, what a command plants)
    ({"diff.json.textconv": "python3 -m json.tool"}, {}, "argparse.py"),
    ({"filter.nb.clean": '"/opt/venv/bin/python3" -m nbstripout'}, {}, "argparse.py"),
    ({"filter.nb.clean": '"VENV/bin/python3" -m nbstripout'}, {}, "nbconvert_x/__init__.py"),  # only its venv has it
    ({"diff.json.textconv": "python3 -c 'import json,sys; print(json.load(sys.stdin))'"}, {}, "json.py"),
    ({"diff.json.textconv": "python3 -mjson.tool"}, {}, "json/__init__.py"),
    ({"diff.json.textconv": "sh -c 'python3 -m json.tool \"$1\"' -"}, {}, "argparse.py"),
    ({"diff.json.textconv": "sh -c 'sh -c \"python3 -m json.tool\"'"}, {}, "argparse.py"),  # nested
    ({"diff.json.textconv": "env -i python3.11 -u -"}, {}, "re.py"),
    ({"diff.json.textconv": "python3 tools/conv.py"}, {"tools/conv.py": "import json\n"}, "tools/json.py"),
    ({"diff.json.textconv": "/usr/bin/env python3 -m json.tool"}, {}, "argparse.py"),  # a wrapper by its path
    ({"diff.json.textconv": "nice -n 5 python3 -m json.tool"}, {}, "argparse.py"),  # an option's value
    ({"diff.json.textconv": "timeout 10 python3 -m json.tool"}, {}, "argparse.py"),  # a wrapper's duration
    ({"diff.json.textconv": "x=a#b; python3 -m json.tool"}, {}, "argparse.py"),  # no comment inside a word
    ({}, {".git/hooks/pre-commit": HOOK_LOOP}, "argparse.py"),  # `);` is two operators
    ({}, PYTHON_HOOK, "scripts/subprocess.py"),  # a Python hook's start folder is its file's real one
    ({}, PYTHON_HOOK, "scripts/pre-commit.py"),
    ({}, {".git/hooks/pre-commit": PRE_COMMIT}, "pre_commit.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\npython3 -m mytool check\n", "mytool.py": "ok\n"}, "mytool.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\nset -e\npython3 scripts/check.py\n", "scripts/check.py": "ok\n"},
     "scripts/check.py"),  # a hook line runs what it names, as a config's command does
    ({"filter.pretty.clean": "npx prettier --stdin-filepath %f"}, {}, "node_modules/.bin/prettier"),
    ({"core.hooksPath": "githooks"}, {}, "githooks/pre-commit"),
    ({}, {".envrc": "dotenv\n", ".env": "A=1\n"}, ".env"),
    ({}, {".envrc": "source_env_if_exists .envrc.local\n"}, ".envrc.local"),
    ({}, {"sub/.envrc": "dotenv_if_exists ../.env.dev\nPATH_add bin\n"}, "sub/bin/git"),
    ({}, {".envrc": "export A=1\n"}, ".envrc"),
    ({}, {".envrc": "source ./scripts/dev-env.sh\n"}, "scripts/dev-env.sh"),  # an .envrc is bash: its own source
    ({}, {".envrc": ". ./dev.sh\n"}, "dev.sh"),
    ({"diff.tar.textconv": "python3 -m tarfile -l"}, {}, "org/python/core.py"),  # copy and pickle try Jython's org
    # Found by a review: a python behind a program no table names, one whose PYTHONPATH is the top, a hook that is
    # a link to a tracked script without a `#!` (git runs it with sh), a hook naming a script from the top's path.
    ({"diff.json.textconv": "ionice -c3 python3 -m json.tool"}, {}, "argparse.py"),
    ({"diff.json.textconv": "flock /tmp/json.lock python3 -m json.tool"}, {}, "argparse.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\nPYTHONPATH=. python3 tools/check.py\n", "tools/check.py": "ok\n"},
     "argparse.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\nPYTHONPATH=\"$PWD\" python3 tools/check.py\n",
          "tools/check.py": "ok\n"}, "json.py"),
    ({}, {"scripts/pre-commit": "echo checked\n", ".git/hooks/pre-commit": "-> ../../scripts/pre-commit"},
     "scripts/pre-commit"),
    ({}, {".git/hooks/pre-commit": '#!/bin/sh\nexec "$(git rev-parse --show-toplevel)/scripts/check.sh"\n',
          "scripts/check.sh": "echo checked\n"}, "scripts/check.sh"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\nnode scripts/lint.js\n", "scripts/lint.js": "require('left-pad')\n"},
     "node_modules/left-pad/index.js"),  # node resolves a require from the top's node_modules
    ({}, {".git/hooks/pre-commit": '#!/bin/sh\n# the tools\nexport PYTHONPATH="$PWD"\npython3 tools/check.py\n',
          "tools/check.py": "ok\n"}, "argparse.py"),  # an export holds on the hook's next lines
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\ncd tools\npython3 check.py\n", "tools/check.py": "ok\n"},
     "tools/argparse.py"),  # and a cd
    # Found by a review: a wrapper's option value that names a shell, python's valued long option, env -S's joined
    # forms, sh -c --, a folder run as a script.
    ({"diff.json.textconv": "env -u sh python3 -m json.tool"}, {}, "argparse.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\nexec -a sh python3 -m mytool\n", "mytool.py": "ok\n"}, "mytool.py"),
    ({"diff.json.textconv": "python3 --check-hash-based-pycs default -m json.tool"}, {}, "argparse.py"),
    ({"diff.json.textconv": "env --split-string='python3 -m json.tool'"}, {}, "argparse.py"),
    ({"diff.json.textconv": "sh -c -- 'python3 -m json.tool'"}, {}, "argparse.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\npython3 tools/\n", "tools/__main__.py": "ok\n"}, "tools/__main__.py"),
    # and a subshell's cd that ends with it, env -C's folder, pushd.
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\n(cd docs && true)\npython3 -m json.tool a.json\n",
          "docs/index.md": "x\n"}, "argparse.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\nenv -C tools python3 -m json.tool a.json\n", "tools/a.py": "x\n"},
     "tools/argparse.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\npushd tools\npython3 -m json.tool a.json\n", "tools/a.py": "x\n"},
     "tools/argparse.py"),
    # One reader for every command text (found by a review): a redirection's target is no word of the command, a
    # word holding a space is read as a command (eval, script -c), a script a command runs or sources is read (its
    # #! line too), a heredoc's text never moves the hook's cd, an expansion may name a python, $PWD is the folder
    # in any word, and a cd into a folder made later moves.
    ({}, {".git/hooks/pre-commit": "#!/bin/bash\npushd tools >/dev/null\npython3 -m json.tool a.json\n",
          "tools/a.py": "x\n"}, "tools/argparse.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\neval 'python3 -m mytool'\n"}, "mytool.py"),
    ({"diff.json.textconv": "script -qc 'python3 -m json.tool' /dev/null"}, {}, "argparse.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\n. ./scripts/env.sh\npython3 -c 'import json'\n",
          "scripts/env.sh": 'export PYTHONPATH="$PWD/lib"\n', "lib/a.py": "x\n"}, "lib/json.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\nscripts/check.sh\n",
          "scripts/check.sh": "#!/bin/sh\npython3 -c 'import json'\n"}, "json.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\ntools/lint.py\n",
          "tools/lint.py": "#!/usr/bin/env python3\nimport json\n"}, "tools/json.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\ncat >/dev/null <<TXT\ncd docs\nTXT\npython3 -m mytool\n",
          "docs/a.md": "x\n"}, "mytool.py"),
    ({}, {".git/hooks/pre-commit": '#!/bin/sh\nPY=$(command -v python3)\n"$PY" -m mytool\n'}, "mytool.py"),
    ({}, {".git/hooks/pre-commit": '#!/bin/sh\nPYTHONUSERBASE="$PWD/.pyuser" python3 -c pass\n'},
     ".pyuser/lib/python3.11/site-packages/usercustomize.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\nmkdir -p build && cd build && python3 -m mytool\n"},
     "build/mytool.py"),
    # A cd may fail, sit in a branch or a function never called: the commands after it are read in every folder
    # they may run in (a second review); and a fd's number, a quoted heredoc end, a comment's backslash, a case
    # pattern's `)`, a script read in the folder it runs in, -c's imports.
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\ncd sub 2>/dev/null && python3 -m mytool\n", "sub/a.py": "x\n"},
     "sub/mytool.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\nif [ -d sub ]; then cd sub; fi\npython3 -m mytool\n",
          "sub/a.py": "x\n"}, "sub/mytool.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\ncommand cd sub\npython3 -m mytool\n", "sub/a.py": "x\n"},
     "sub/mytool.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\nf() { cd sub; }\npython3 -m mytool\n", "sub/a.py": "x\n"},
     "mytool.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\ncd build\npython3 -m mytool\n"}, "mytool.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\ncd docs\ncd -\npython3 -m mytool\n", "docs/a.md": "x\n"},
     "mytool.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\n(cd sub && case x in x) true;; esac; python3 -m mytool)\n",
          "sub/a.py": "x\n"}, "sub/mytool.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\ncat >/dev/null <<\\EOF\ncd docs\nEOF\npython3 -m mytool\n",
          "docs/a.md": "x\n"}, "mytool.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\n# see \\\npython3 -m mytool\n"}, "mytool.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\n(cd app && sh ../scripts/lint.sh)\n", "app/a.py": "x\n",
          "scripts/lint.sh": "python3 -m mytool\n"}, "app/mytool.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\n(cd app && sh ../s.sh)\n(cd api && sh ../s.sh)\n",
          "app/a.py": "x\n", "api/a.py": "x\n", "s.sh": "python3 -m mytool\n"}, "api/mytool.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\npython3 -c 'import mytool; mytool.main()'\n", "mytool.py": "ok\n"},
     "mytool.py"),
    # A variable a command set is read as its value (set twice: as any program), and so is git's top.
    ({}, {".git/hooks/pre-commit": '#!/bin/sh\nMOD=mytool\npython3 -m "$MOD"\n'}, "mytool.py"),
    ({}, {".git/hooks/pre-commit": '#!/bin/sh\nS=scripts/check.sh; sh "$S"\n',
          "scripts/check.sh": "python3 -m mytool\n"}, "mytool.py"),
    ({}, {".git/hooks/pre-commit": '#!/bin/sh\n"$(git rev-parse --show-toplevel)/scripts/check.sh"\n',
          "scripts/check.sh": "#!/bin/sh\npython3 -m mytool\n"}, "mytool.py"),
    ({}, {".git/hooks/pre-commit": '#!/bin/sh\nRUN=python3\n[ -n "$CI" ] && RUN=echo\n"$RUN" -m mytool\n'},
     "mytool.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\nsh tools/check.sh\n",  # a script's own folder, as it names it
          "tools/check.sh": 'cd "$(dirname "$0")"\npython3 -m mytool\n'}, "tools/mytool.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\n(cd sub && cat <<EOF\n)\nEOF\npython3 -m mytool)\n",
          "sub/a.py": "x\n"}, "sub/mytool.py"),  # a `)` in a heredoc's text ends no folder
    # A PYTHONPATH's folders are start folders, whatever python runs (pytest's, your shell's after an .envrc); and a
    # direnv command after an export.
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\nPYTHONPATH=src pytest -q\n", "src/app.py": "x\n"}, "src/argparse.py"),
    ({}, {".envrc": "export PYTHONPATH=src\n", "src/app.py": "x\n"}, "src/sitecustomize.py"),
    ({}, {".envrc": "export A=1\ndotenv\n", ".env": "A=1\n"}, ".env"),
    # A cd to a word the reader cannot evaluate goes to any folder the text names; a backquoted command is read.
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\nsh scripts/each.sh\n", "app/a.py": "x\n", "api/a.py": "x\n",
          "scripts/each.sh": 'for d in app api; do (cd "$d" && python3 -m mytool); done\n'}, "api/mytool.py"),
    ({}, {".git/hooks/pre-commit": "#!/bin/sh\nV=`python3 -m mytool`\n"}, "mytool.py"),
    # A name computed at run time (found by a review): the folder it is computed in is held whole; a folder a
    # command runs, whole; a value git takes on its command line; what a runner reads in its folder (read as its
    # scripts), and the folder of a script in a language the reader does not parse.
    *((({}, {".git/hooks/pre-commit": f"#!/bin/sh\n{hook}\n", "tools/a.sh": "echo a\n", **files}, planted)
       for hook, files, planted in [
        ("sh tools/*.sh", {}, "tools/b.sh"),
        ('for f in tools/*.sh; do sh "$f"; done', {}, "tools/b.sh"),
        ("sh tools/{a,b}.sh", {}, "tools/b.sh"),
        ('sh "${V:-tools/x.sh}"', {}, "tools/x.sh"),
        ("sh tools/$(uname).sh", {}, "tools/Linux.sh"),
        ("find tools -name '*.sh' -exec sh {} \\;", {}, "tools/b.sh"),
        ("run-parts tools/hooks.d", {"tools/hooks.d/README": "x\n"}, "tools/hooks.d/10-check"),
        ("ls tools | xargs -n1 sh", {}, "tools/b.sh"),
        ("python3 -c \"exec(open('tools/x.py').read())\"", {"tools/x.py": "print(1)\n"}, "tools/x.py"),
        ("git -c core.hooksPath=tools/hooks commit -q", {"tools/hooks/README": "x\n"}, "tools/hooks/pre-commit"),
        ("git -c core.fsmonitor=fsmon.sh status", {}, "fsmon.sh"),
        ("git -c include.path=extra.cfg log", {}, "extra.cfg"),
        ("npm test", {"package.json": "{}\n"}, ".npmrc"),
        ("npm run lint", {"package.json": "{}\n", ".npmrc": "script-shell=./x.sh\n"}, "x.sh"),
        ("yarn lint", {".yarnrc.yml": "yarnPath: .yarn/releases/yarn.cjs\n"}, ".yarn/releases/yarn.cjs"),
        ("yarn lint", {".yarnrc": 'yarn-path ".yarn/yarn.js"\n'}, ".yarn/yarn.js"),
        ("pnpm install", {}, ".pnpmfile.cjs"),
        ("ssh -F tools/ssh.cfg host true", {"tools/ssh.cfg": "Host *\n  ProxyCommand sh tools/proxy.sh %h\n",
                                             "tools/proxy.sh": "nc $1 22\n"}, "tools/proxy.sh"),
        ("ruby tools/a.rb", {"tools/a.rb": "require './tools/b'\n", "tools/b.rb": "x\n"}, "tools/b.rb"),
        ("node tools/a.js", {"tools/a.js": "require('./b.js')\n", "tools/b.js": "x\n"}, "tools/b.js"),
        ("make lint", {"Makefile": "lint:\n\tsh tools/lint.sh\n", "tools/lint.sh": "true\n"}, "tools/lint.sh"),
        ("make lint", {}, "Makefile"),
        ("make -C sub lint", {"sub/a.c": "x\n"}, "sub/Makefile"),
        ("make -f build.mk", {"build.mk": "all:\n\tsh tools/b.sh\n", "tools/b.sh": "true\n"}, "tools/b.sh"),
        ("just lint", {"justfile": "lint:\n    sh tools/j.sh\n", "tools/j.sh": "true\n"}, "tools/j.sh"),
        ("just lint", {}, "justfile"),
        # A ${V:-default} is its default (the variable may be unset) and computed (it may be set): its folder whole.
        ('exec "${HOOK_DIR:-scripts}/pre.sh"', {"scripts/pre.sh": "true\n"}, "scripts/other.sh"),
        ('python3 "${TOOLS:-tools}/x.py"', {"tools/x.py": "pass\n"}, "tools/x.py"),
        # A `<` target is a text the command reads, each line a name; a Makefile's include, a Makefile it reads.
        ('while read f; do "./$f"; done < hooks.txt', {"hooks.txt": "a.hook\n"}, "a.hook"),
        ("make -s check", {"Makefile": "-include .env\ncheck:\n\t@true\n"}, ".env"),
        ("make -s check", {"Makefile": "include *.mk\ncheck:\n\t@true\n"}, "evil.mk"),
        # A name computed at the top: no sandbox holds a pattern's files to come, so the top is held whole.
        ('for f in ./*.hook; do "$f"; done', {}, "a.hook"),
        ('find . -maxdepth 1 -name "*.hook" -exec {} \\;', {}, "a.hook"),
        ("ls | grep '\\.hook$' | xargs -n1 sh", {}, "a.hook"),
        ("make -s check", {"Makefile": "include rules.mk\n", "rules.mk": "x:\n\tsh tools/r.sh\n",
                           "tools/r.sh": "true\n"}, "tools/r.sh")])),
    ({"alias.ci": "!git -c core.hooksPath=tools/hooks commit"}, {"tools/hooks/README": "x\n"},
     "tools/hooks/pre-commit"),
]


@pytest.mark.parametrize(("config", "files", "planted"), ROUTES, ids=[r[2] + f"-{n}" for n, r in enumerate(ROUTES)])
def test_nothing_the_host_would_load_can_be_planted(runner, tmp_path, config, files, planted):
    ws, venv = runner.ws, tmp_path / "venv"
    (venv / "lib" / "python3.99" / "site-packages" / "nbconvert_x").mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "bin" / "python3").symlink_to(sys.executable)
    protected = repository(runner, {k: v.replace("VENV", str(venv)) for k, v in config.items()}, files)
    assert protected.why(ws / planted) is not None, planted
    out = runner.run(f"mkdir -p {(ws / planted).parent}; printf evil > {planted}; chmod +x {planted}; echo done",
                     protected=protected)
    assert "done" in out, out
    assert not (ws / planted).is_file() or (ws / planted).read_text() != "evil", out


def test_the_projects_own_package_beside_stays_writable(runner):
    """A package of the project's own at the top (an installed name) is its work; a standard library name never is."""
    ws = runner.ws
    protected = repository(runner, ROUTES[0][0], {"pytest/__init__.py": "mine\n", "string.py": "mine\n"})
    out = runner.run("echo edited > pytest/__init__.py; echo edited > string.py; echo done", protected=protected)
    assert "done" in out, out
    assert (ws / "pytest" / "__init__.py").read_text() == "edited\n", out
    assert (ws / "string.py").read_text() == "mine\n", out


def test_a_folder_a_hook_or_a_config_command_works_on_stays_writable(runner):
    """``flake8 src/ tests/`` in a hook, ``black src/`` as a filter: the folders are what the command works on (its
    code is the program and the scripts it names). Before, a folder written with a ``/`` was held read-only."""
    ws = runner.ws
    protected = repository(runner, {"filter.fmt.clean": "black src/"},
                           {".git/hooks/pre-commit": "#!/bin/sh\nflake8 src/ tests/\n", "src/app.py": "x\n",
                            "tests/test_app.py": "y\n"})
    assert protected.why(ws / "src" / "app.py") is None and protected.why(ws / "tests" / "test_app.py") is None
    assert protected.why(ws / ".git" / "hooks" / "pre-commit") is not None


@pytest.mark.parametrize("hook", [PRE_COMMIT, HOOK_LOOP, "#!/bin/sh\nruff check src tests\npytest tests\n",
                                  '#!/usr/bin/env sh\n. "$(dirname -- "$0")/_/husky.sh"\nnpx lint-staged\n'],
                         ids=["pre-commit", "loop", "ruff-pytest", "husky"])
def test_a_common_hooks_computed_words_leave_the_tree_writable(runner, hook):
    """A computed name holds the folder it is computed in whole; the common hooks' (``"${ARGS[@]}"``, ``"$f"``
    given to a python module, husky's ``$(dirname -- "$0")``) name no script, so the working tree stays the work."""
    ws = runner.ws
    protected = repository(runner, {}, {".git/hooks/pre-commit": hook, "src/app.py": "x\n", "tests/t.py": "y\n"})
    assert protected.why(ws / "src" / "app.py") is None and protected.why(ws / "tests" / "t.py") is None


HUSKY_9 = """#!/usr/bin/env sh
n=$(basename "$0")
s=$(dirname "$(dirname "$0")")/$n
[ ! -f "$s" ] && exit 0
i="${XDG_CONFIG_HOME:-$HOME/.config}/husky/init.sh"
[ -f "$i" ] && . "$i"
[ "${HUSKY-}" = "0" ] && exit 0
export PATH="node_modules/.bin:$PATH"
sh -e "$s" "$@"
"""
HUSKY_8 = """#!/usr/bin/env sh
if [ -z "$husky_skip_init" ]; then
  readonly hook_name="$(basename -- "$0")"
  if [ -f ~/.huskyrc ]; then
    . ~/.huskyrc
  fi
  readonly husky_skip_init=1
  export husky_skip_init
  sh -e "$0" "$@"
  exit $?
fi
"""


@pytest.mark.parametrize(("config", "files", "held"), [
    ({"core.hooksPath": ".husky/_"}, {".husky/_/h": HUSKY_9, ".husky/_/pre-commit": '. "$(dirname "$0")/h"\n',
                                      ".husky/pre-commit": "npx lint-staged\n"}, ".husky/pre-commit"),
    ({"core.hooksPath": ".husky"}, {".husky/_/husky.sh": HUSKY_8, ".husky/pre-commit":
                                    '#!/usr/bin/env sh\n. "$(dirname -- "$0")/_/husky.sh"\nnpx lint-staged\n'},
     ".husky/pre-commit"),
    ({}, {".envrc": "layout node\n"}, ".envrc")], ids=["husky-9", "husky-8", "direnv-layout-node"])
def test_a_stock_hook_manager_holds_its_folder_not_the_tree(runner, config, files, held):
    """husky's stock scripts compute the hook they run from ``$0`` (``$(dirname "$(dirname "$0")")/$n``: the
    ``.husky`` folder) and source a file under ``$HOME``; ``layout node`` names no program. Found by a review: each
    held the whole working tree read-only (``touch newfile`` failed), husky 9's ``.husky/pre-commit`` unheld before."""
    ws = runner.ws
    protected = repository(runner, config, {**files, "src/app.py": "x\n"})
    assert protected.why(ws / "src" / "app.py") is None and protected.why(ws / "newfile") is None
    assert protected.why(ws / held) is not None and protected.why(ws / ".husky" / "x") is not None or not config
    out = runner.run("echo edited > src/app.py; touch newfile; echo done", protected=protected)
    assert "done" in out and (ws / "src" / "app.py").read_text() == "edited\n" and (ws / "newfile").exists(), out


MARKER = "print('PLANTED-ON-THE-HOST')\nraise SystemExit\n"
COMPILED = ["argparse.pyc", "argparse/__init__.pyc", "__pycache__/argparse.TAG.pyc"]


@pytest.mark.parametrize("made", [False, True], ids=["no-pycache-yet", "pycache-there"])
@pytest.mark.parametrize("route", [ROUTES[0], ROUTES[13]], ids=["config", "hook"])
def test_no_compiled_form_of_a_module_the_host_imports_can_be_planted(runner, tmp_path, route, made):
    """Python imports a sourceless ``argparse.pyc`` (or a package's ``__init__.pyc``) from its start folder, and
    ``__pycache__``'s bytecode in place of an existing ``argparse.py`` whose mtime and size its header records.
    Before, from a hook's ``python3 -m json.tool``, a command's ``__pycache__/argparse.cpython-3XX.pyc`` ran on
    the host. Each is compiled by the host's own python3, which then runs ``json.tool`` there as git would. One
    command plants every form (a sandbox's start each is most of the cost); each is then tried on the host alone
    (what is left of the others put away), so one held form never hides another's."""
    python = shutil.which("python3")
    if python is None:
        pytest.skip("no python3 on PATH")
    ws = runner.ws
    tag = subprocess.run([python, "-c", "import sys; print(sys.implementation.cache_tag)"], capture_output=True,
                         text=True, check=True).stdout.strip()
    files = {**route[1], "argparse.py": "from argparse_impl import *  # the project's own, a standard library name\n",
             "a.json": "{}\n", **({"__pycache__/mine.pyc": "x"} if made else {})}
    # A payload with the protected argparse.py's size and mtime: its bytecode's header matches that source.
    size = len(files["argparse.py"])
    (tmp_path / "payload.py").write_text((MARKER + "#" * size)[:size])
    repository(runner, route[0], {k: v for k, v in files.items() if k != "argparse.py"})
    (ws / "argparse.py").write_text(files["argparse.py"])
    mtime = os.stat(ws / "argparse.py").st_mtime
    os.utime(tmp_path / "payload.py", (mtime, mtime))
    targets = [planted.replace("TAG", tag) for planted in COMPILED]
    py_compile.compile(str(tmp_path / "payload.py"), cfile=str(ws / "payload.bin"))
    runner.chown(ws)
    out = runner.run("".join(f"mkdir -p {Path(t).parent}; cp payload.bin {t}; " for t in targets) + "echo done",
                     protected=Protected.of(ws))
    assert "done" in out, out
    left = {t: (ws / t).read_bytes() for t in targets if (ws / t).is_file()}
    for target in targets:
        for other in left:
            (ws / other).unlink(missing_ok=True)
        if target in left:
            (ws / target).write_bytes(left[target])
        # A source beside a bare .pyc is imported first: moved aside (its mtime kept), a planted one would run.
        aside = target == "argparse.pyc" and (ws / "argparse.py").rename(ws / "argparse.py.aside")
        host = subprocess.run([python, "-m", "json.tool", "a.json"], cwd=ws, capture_output=True, text=True,
                              timeout=60)
        if aside:
            aside.rename(ws / "argparse.py")
        assert "PLANTED-ON-THE-HOST" not in host.stdout + host.stderr, (target, out, host.stdout, host.stderr[-500:])


def repository(runner, config, files):
    """A repository in the runner's workspace with ``config`` and ``files`` (``-> target``: a link), owned by its
    user; its protected set."""
    ws = runner.ws
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    for key, value in config.items():
        subprocess.run(["git", "config", "--file", str(ws / ".git" / "config"), key, value], check=True)
    for name, text in files.items():
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        if text.startswith("-> "):
            (ws / name).symlink_to(text[3:])
        else:
            (ws / name).write_text(text)
    runner.chown(ws)
    return Protected.of(ws)
