"""What a command puts on the way to a protected path, or hides there with ``chmod``, never runs on the host.

Before, the set-aside after a command went its own way for each kind of path, and each way had a gap: a ``.git``
symlink to a git directory outside, replaced by a folder holding ``core.fsmonitor``, was "known" and stayed; a
folder on the import path swapped for a symlink (``src -> src.real``, ``sitecustomize -> .x/sitecustomize``) made
the look-up of what it holds give up, so its ``sitecustomize.py`` ran at the next python start; an import folder
missing when the run started was not looked at at all; and ``chmod 000 src``, ``chmod 000 config`` or
``chmod 0311 .`` hid a new ``sitecustomize.py``, what replaced a kept symlink, or a new repository from a normal
user's walk. Now every step to every protected path is looked at by name from the workspace, each folder on the
way readable first, and one that is not what it was is set aside (a symlink that was there put back).
"""

from __future__ import annotations

import base64
import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from deep_agent.tools import Workspace, builtin_tools
from deep_agent.tools._protected import Protected
from deep_agent.tools._sandbox import SET_ASIDE, Sandbox

PLANT = "open({!r}, 'w').write('ran')\n"


def _starts_clean(runner, *folders: str) -> bool:
    """Whether a python started with ``folders`` of the workspace on its path ran nothing the command left."""
    path = os.pathsep.join(str(runner.ws / f) for f in folders)
    subprocess.run([sys.executable, "-c", "pass"], env={**os.environ, "PYTHONPATH": path}, check=True,
                   capture_output=True)
    return not (runner.ws / "pwned").exists()


def test_a_symlinked_git_directory_replaced_by_a_repository_is_set_aside_and_the_link_put_back(runner):
    outside = Path(tempfile.mkdtemp(prefix="sandbox-gitdirs-"))
    try:
        links = {}
        for name, work in (("top.git", runner.ws), ("sub.git", runner.ws / "sub")):
            subprocess.run(["git", "init", "-q", "--separate-git-dir", str(outside / name), str(work)], check=True)
            (work / ".git").unlink()
            (work / ".git").symlink_to(outside / name)  # a shared git directory, as `repo` checkouts have
            subprocess.run(["git", "config", "--file", str(outside / name / "config"), "core.worktree", str(work)],
                           check=True)
            links[work / ".git"] = str(outside / name)
        runner.chown(runner.ws, outside)
        out = runner.run("for w in . sub; do rm $w/.git && git init -q $w &&"
                         " git -C $w config core.fsmonitor 'touch pwned; false'; done; echo done")
        assert "done" in out, out
        assert {link: os.path.islink(link) and os.readlink(link) for link in links} == links, runner.set_aside
        for work in (runner.ws, runner.ws / "sub"):
            assert (work / (".git" + SET_ASIDE)).is_dir(), runner.set_aside
            subprocess.run(["git", "status"], cwd=work, capture_output=True, check=False, **runner.popen)
        assert not (runner.ws / "pwned").exists() and not (runner.ws / "sub" / "pwned").exists()
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def test_a_symlink_a_command_puts_on_the_way_to_what_python_imports_is_set_aside(runner, monkeypatch):
    (runner.ws / "src" / "project").mkdir(parents=True)
    runner.chown(runner.ws)
    monkeypatch.syspath_prepend(str(runner.ws / "src"))  # a src layout on PYTHONPATH
    monkeypatch.syspath_prepend(str(runner.ws))  # `python -m deep_agent` started in the workspace
    plant = PLANT.format(str(runner.ws / "pwned"))
    out = runner.run(f"mv src src.real && ln -s src.real src && echo \"{plant}\" > src.real/sitecustomize.py &&"
                     f" mkdir -p .x/sitecustomize && echo \"{plant}\" > .x/sitecustomize/__init__.py &&"
                     " ln -s .x/sitecustomize sitecustomize && echo done", protected=Protected.of(runner.ws))
    assert "done" in out, out
    assert not os.path.lexists(runner.ws / "src") and not os.path.lexists(runner.ws / "sitecustomize"), out
    assert {p.name for p in runner.set_aside} == {"src" + SET_ASIDE, "sitecustomize" + SET_ASIDE}, runner.set_aside
    assert _starts_clean(runner, "src", ".")


def test_an_import_folder_missing_when_the_run_starts_is_watched_by_name(runner, monkeypatch):
    for folder in ("src", "lib"):
        monkeypatch.syspath_prepend(str(runner.ws / folder))  # PYTHONPATH=src:lib, the project yet to be made
    protected = Protected.of(runner.ws)
    assert protected.why(runner.ws / "src" / "sitecustomize.py") is not None
    plant = PLANT.format(str(runner.ws / "pwned"))
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w") as archive:
        archive.writestr("sitecustomize.py", plant)
    out = runner.run(f"mkdir src && echo \"{plant}\" > src/sitecustomize.py && echo 'X = 1' > src/mine.py &&"
                     f" echo {base64.b64encode(packed.getvalue()).decode()} | base64 -d > lib && echo done",
                     protected=protected)  # a zip on the path is imported from as a folder is
    assert "done" in out and (runner.ws / "src" / "mine.py").exists(), out  # the folder is the agent's work
    assert not (runner.ws / "src" / "sitecustomize.py").exists(), runner.set_aside
    assert not (runner.ws / "lib").exists(), runner.set_aside
    assert _starts_clean(runner, "src", "lib")


def test_a_commands_chmod_hides_nothing_from_the_set_aside(runner):
    (runner.ws / "src" / "project").mkdir(parents=True)
    (runner.ws / "tools" / "githooks").mkdir(parents=True)
    (runner.ws / "config").mkdir()
    (runner.ws / "config" / "hooks").symlink_to("../tools/githooks")  # kept: core.hooksPath leads through it
    subprocess.run(["git", "init", "-q", str(runner.ws)], check=True)
    subprocess.run(["git", "config", "--file", str(runner.ws / ".git" / "config"), "core.hooksPath", "config/hooks"],
                   check=True)
    runner.chown(runner.ws)
    plant = PLANT.format(str(runner.ws / "pwned"))
    command = (f"echo \"{plant}\" > src/sitecustomize.py && chmod 000 src &&"
               " rm config/hooks && mkdir config/hooks && echo 'touch pwned' > config/hooks/pre-commit &&"
               " chmod +x config/hooks/pre-commit && chmod 000 config &&"
               " git init -q d/sub && git -C d/sub config core.fsmonitor 'touch pwned; false' && chmod 0600 d &&"
               " git init -q sub && git -C sub config core.fsmonitor 'touch pwned; false' && chmod 0311 . && echo done")

    def body() -> str:  # the walk as the user the command ran as: root reads whatever the modes say
        sys.path.insert(0, str(runner.ws / "src"))
        protected, moved = Protected.of(runner.ws), []
        sandbox = Sandbox.find()
        assert sandbox is not None
        with sandbox.running(runner.ws, command, protected, set_aside=moved, cwd=runner.ws,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as process:
            out = process.communicate(timeout=60)[0].decode()
        assert "done" in out, out
        return "\n".join(p.relative_to(runner.ws).as_posix() for p in moved)

    moved = runner.in_a_process(body).splitlines()
    assert {"src/sitecustomize.py" + SET_ASIDE, "config/hooks" + SET_ASIDE, "d/sub/.git" + SET_ASIDE,
            "sub/.git" + SET_ASIDE} <= set(moved), moved
    assert os.readlink(runner.ws / "config" / "hooks") == "../tools/githooks"
    for folder in (runner.ws, runner.ws / "d", runner.ws / "src", runner.ws / "config"):
        folder.chmod(0o755)  # the user looking, later
    for work in ("sub", "d/sub", "."):
        subprocess.run(["git", "status"], cwd=runner.ws / work, capture_output=True, check=False, **runner.popen)
    subprocess.run(["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "x"],
                   cwd=runner.ws, capture_output=True, check=False, **runner.popen)
    assert _starts_clean(runner, "src")


def test_a_set_aside_that_cannot_complete_stops_every_later_command_until_it_completes(tmp_path, monkeypatch):
    if shutil.which("bwrap") is None:
        pytest.skip("bwrap is not installed (Debian's bubblewrap package)")

    def broken(root: Path) -> object:
        raise OSError(24, "Too many open files")
        yield

    monkeypatch.setattr("deep_agent.tools._sandbox._walk_all", broken)
    (bash,) = [t for t in builtin_tools(Workspace(tmp_path)) if t.name == "Bash"]
    with pytest.warns(RuntimeWarning, match="could not be checked .* no command runs in this workspace"):
        answer = bash.invoke({"command": "git init -q r && echo made", "timeout": 20_000})
    assert answer.startswith("made") and "could not be checked" in answer, answer
    answer = str(bash.invoke({"command": "touch ran; echo ran", "timeout": 20_000}))  # tried again: fails again
    assert "refused" in answer and "could not be checked" in answer, answer
    assert not (tmp_path / "ran").exists()
    monkeypatch.undo()  # the walk works again: the next start completes it, then its command runs
    answer = str(bash.invoke({"command": "touch ran; echo ran", "timeout": 20_000}))
    assert answer.startswith("ran") and "r/.git" in answer, answer
    assert (tmp_path / "ran").exists() and not (tmp_path / "r" / ".git").exists()
    assert (tmp_path / "r" / (".git" + SET_ASIDE)).is_dir()
