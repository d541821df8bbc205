"""A folder on ``PATH`` in the workspace is protected together with what its programs load.

Before: only the folder itself was: with a project's ``.venv/bin`` on ``PATH`` a command wrote
``.venv/lib/python3.11/site-packages/evil.pth``, which the next ``.venv/bin/python`` on the host ran; with
``node_modules/.bin`` on ``PATH``, ``.bin/tool -> ../tool/bin/tool.sh`` was rewritten through its target.
"""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture
def on_path(runner, monkeypatch):
    def put(*folders: str) -> None:
        monkeypatch.setenv("PATH", os.pathsep.join([*(str(runner.ws / f) for f in folders), os.environ["PATH"]]))
    return put


def test_a_virtual_environment_on_path_is_protected_whole(runner, on_path):
    site = runner.ws / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (runner.ws / ".venv" / "bin").mkdir()
    (runner.ws / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    runner.chown(runner.ws / ".venv")
    on_path(".venv/bin")
    out = runner.run(f"echo 'import os' > {site.relative_to(runner.ws)}/evil.pth; echo done")
    assert "done" in out and not (site / "evil.pth").exists(), out


def test_node_modules_and_the_targets_of_a_path_folders_links_are_protected(runner, on_path):
    tool = runner.ws / "node_modules" / "tool" / "bin" / "tool.sh"
    tool.parent.mkdir(parents=True)
    tool.write_text("echo tool\n")
    (runner.ws / "node_modules" / ".bin").mkdir()
    (runner.ws / "node_modules" / ".bin" / "tool").symlink_to("../tool/bin/tool.sh")
    (runner.ws / "scripts").mkdir()
    (runner.ws / "scripts" / "lint.sh").write_text("echo lint\n")
    (runner.ws / "bin").mkdir()
    (runner.ws / "bin" / "lint").symlink_to("../scripts/lint.sh")
    runner.chown(runner.ws / "node_modules", runner.ws / "scripts", runner.ws / "bin")
    on_path("node_modules/.bin", "bin")
    out = runner.run("echo evil > node_modules/tool/bin/tool.sh; echo evil > scripts/lint.sh; "
                     "echo made > scripts/other.sh; echo done")
    assert "done" in out and tool.read_text() == "echo tool\n", out
    assert (runner.ws / "scripts" / "lint.sh").read_text() == "echo lint\n", out
    assert (runner.ws / "scripts" / "other.sh").exists(), out  # the rest of the link's folder stays work


def _venv(runner, home: str = "/usr/bin"):
    site = runner.ws / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (runner.ws / ".venv" / "bin").mkdir()
    (runner.ws / ".venv" / "pyvenv.cfg").write_text(f"home = {home}\n")
    return site


def test_what_a_protected_environment_runs_at_start_from_a_folder_its_pth_adds_is_protected(runner, on_path):
    # Editable installs: .pth path lines (not import lines) add src, lib and the workspace itself; python imports
    # sitecustomize and usercustomize from them at every start.
    site, tag = _venv(runner), sys.implementation.cache_tag
    (site / "_project.pth").write_text(f"# the project\nimport sys\n{runner.ws / 'src'}\n../../../../lib\n")
    (site / "_flat.pth").write_text(f"{runner.ws}\n")
    for folder in ("src", "lib"):
        (runner.ws / folder).mkdir()
    (runner.ws / "lib" / "usercustomize.py").write_text("")
    runner.chown(runner.ws / ".venv", runner.ws / "src", runner.ws / "lib")
    on_path(".venv/bin")
    out = runner.run("echo 'import os' > src/sitecustomize.py; echo 'import os' > lib/usercustomize.py; "
                     "mkdir src/sitecustomize; echo 'X = 1' > src/other.py; echo 'import os' > sitecustomize.pyc; "
                     f"mkdir -p lib/__pycache__; echo 'import os' > lib/__pycache__/usercustomize.{tag}.pyc; "
                     "echo done")
    assert "done" in out and not (runner.ws / "sitecustomize.pyc").exists(), out
    # Python runs __pycache__'s bytecode in place of the existing usercustomize.py while its header matches.
    assert not (runner.ws / "lib" / "__pycache__" / f"usercustomize.{tag}.pyc").exists(), out
    assert not (runner.ws / "src" / "sitecustomize.py").exists(), out
    assert not (runner.ws / "src" / "sitecustomize").exists(), out
    assert (runner.ws / "lib" / "usercustomize.py").read_text() == "", out
    assert (runner.ws / "src" / "other.py").exists(), out  # the rest of the folder stays work
    assert any(p.name.startswith("sitecustomize.py.made-by-agent") for p in runner.set_aside), runner.set_aside


def test_a_base_interpreter_in_the_workspace_is_protected_with_its_environment(runner, on_path):
    (runner.ws / "python" / "bin").mkdir(parents=True)
    (runner.ws / "python" / "lib").mkdir()
    _venv(runner, home=str(runner.ws / "python" / "bin"))
    runner.chown(runner.ws / ".venv", runner.ws / "python")
    on_path(".venv/bin")
    out = runner.run("echo 'import os' > python/lib/sitecustomize.py; echo done")
    assert "done" in out and not (runner.ws / "python" / "lib" / "sitecustomize.py").exists(), out
