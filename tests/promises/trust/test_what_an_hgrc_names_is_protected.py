"""What a Mercurial repository's ``.hg/hgrc`` (Sapling's ``.sl/config``, Jujutsu's ``.jj/repo/config.toml``) names is
protected, as a git config's is.

``hg status`` reads ``.hg/hgrc``, the files it ``%include``s, and runs its
``[hooks]`` commands, on the host; ``sl status`` the same from ``.sl/config``.
Before: ``.hg`` (``.sl``) was protected but not what its config names, so a
command added a hook to an included ``../shared.rc`` or rewrote the script a
hook runs.
"""

from __future__ import annotations

import os

import pytest


@pytest.mark.parametrize("config", [".hg/hgrc", ".sl/config"])
def test_an_included_file_and_a_hooks_script_are_never_written(runner, config):
    ws = runner.ws
    (ws / config).parent.mkdir()
    (ws / config).write_text("%include ../shared.rc\n[hooks]\npost-status = sh scripts/post.sh\n")
    (ws / "shared.rc").write_text("[ui]\nusername = me\n")
    (ws / "scripts").mkdir()
    (ws / "scripts" / "post.sh").write_text("true\n")
    runner.chown(ws)
    out = runner.run("echo '[hooks]' >> shared.rc; echo evil > scripts/post.sh; echo made > scripts/other.sh; "
                     "echo done")
    assert "done" in out and (ws / "shared.rc").read_text() == "[ui]\nusername = me\n", out
    assert (ws / "scripts" / "post.sh").read_text() == "true\n", out
    assert (ws / "scripts" / "other.sh").exists(), out  # the rest of the folder stays work


def test_what_a_jj_repository_config_runs_is_never_written(runner):
    """``jj fix`` runs ``fix.tools``' commands and ``jj resolve`` a merge tool's, on the host, from the config in
    ``.jj/repo/config.toml`` (commands as TOML lists). Before: ``.jj`` was protected but not what its config names."""
    ws = runner.ws
    (ws / ".jj" / "repo").mkdir(parents=True)
    (ws / ".jj" / "repo" / "config.toml").write_text(
        '[fix.tools.style]\ncommand = ["python3", "scripts/style.py", "$path"]\npatterns = ["glob:**/*.py"]\n'
        '[merge-tools.mine]\nprogram = "sh"\nmerge-args = ["tools/merge.sh", "$left", "$right"]\n'
        '[ui]\npager = "python3 -m pager_x"\n')
    for name in ("scripts/style.py", "tools/merge.sh"):
        (ws / name).parent.mkdir(exist_ok=True)
        (ws / name).write_text("true\n")
    runner.chown(ws)
    out = runner.run("echo evil > scripts/style.py; echo evil > tools/merge.sh; echo evil > pager_x.py; "
                     "echo evil > scripts/argparse.py; echo made > scripts/other.txt; echo done")
    assert "done" in out, out
    for name in ("scripts/style.py", "tools/merge.sh"):
        assert (ws / name).read_text() == "true\n", out
    for name in ("pager_x.py", "scripts/argparse.py"):  # a python -m module; what a script's python imports
        assert not (ws / name).is_file() or "evil" not in (ws / name).read_text(), out
    assert (ws / "scripts" / "other.txt").exists(), out  # the rest of the folder stays work


@pytest.mark.parametrize(("vcs", "config", "text"), [
    (".hg", "home/.hgrc", "[hooks]\nprecommit = python3 -m json.tool\n"),
    (".hg", "xdg/hg/hgrc", "[hooks]\nprecommit = python3 -m json.tool\n"),
    (".hg", "listed/hg.d/hooks.rc", "[hooks]\nprecommit = python3 -m json.tool\n"),  # HGRCPATH's folder
    (".sl", "xdg/sapling/sapling.conf", "[hooks]\nprecommit = python3 -m json.tool\n"),
    (".jj", "xdg/jj/config.toml", '[fix.tools.fmt]\ncommand = ["python3", "-m", "json.tool"]\n'),
])
def test_the_users_own_config_of_another_version_control_is_read_too(tmp_path, monkeypatch, vcs, config, text):
    """A hook in the user's ``~/.hgrc`` (or the XDG folder's, or ``HGRCPATH``'s; Sapling's and Jujutsu's likewise)
    runs in the repository too: what its python imports from the top is protected, as for git's global config.
    Before, only the repository's own file was read, and ``argparse.py`` planted at the top ran."""
    from deep_agent.tools._protected import Protected

    ws = tmp_path / "ws"
    (ws / vcs).mkdir(parents=True)
    (tmp_path / config).parent.mkdir(parents=True)
    (tmp_path / config).write_text(text)
    for name in ("HGRCPATH", "SL_CONFIG_PATH", "JJ_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    if config.startswith("listed/"):
        monkeypatch.setenv("HGRCPATH", str(tmp_path / "listed" / "hg.d"))
    assert Protected.of(ws).why(ws / "argparse.py") is not None


@pytest.mark.parametrize("case", ["compiled git hook", "NUL in an hgrc", "include of ~nobody", "HGRCPATH of ~nobody"])
def test_an_odd_config_or_hook_never_stops_the_walk_and_what_follows_it_is_still_read(tmp_path, monkeypatch, case):
    """A walk that raises refuses every command of the workspace; one that stops reading early leaves later hooks
    unseen. Before: a compiled hook (its NUL bytes read as a path) and these configs raised, and an ``%include``
    of an unknown user's file dropped the rest of its hgrc (a hook after it ran a planted ``argparse.py``)."""
    import shutil
    import subprocess

    from deep_agent.tools._protected import Protected

    ws = tmp_path / "ws"
    ws.mkdir()
    for name in ("HGRCPATH", "SL_CONFIG_PATH", "JJ_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    hook = "[hooks]\nprecommit = python3 -m json.tool\n"
    if case == "compiled git hook":
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        shutil.copy("/bin/true", ws / ".git" / "hooks" / "pre-commit")
        (ws / ".git" / "hooks" / "post-commit").write_text("#!/bin/sh\npython3 -m json.tool a.json\n")
    else:
        (ws / ".hg").mkdir()
        first = {"NUL in an hgrc": "[ui]\nusername = a\x00b\n", "include of ~nobody": "%include ~nobody-here/x.rc\n"}
        (ws / ".hg" / "hgrc").write_text(first.get(case, "") + hook)
        if case == "HGRCPATH of ~nobody":
            monkeypatch.setenv("HGRCPATH", f"~nobody-here/hgrc{os.pathsep}{ws / '.hg' / 'hgrc'}")
    assert Protected.of(ws).why(ws / "argparse.py") is not None
