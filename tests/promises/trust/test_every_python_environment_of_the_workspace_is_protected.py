"""Every Python environment in the workspace is protected, the workspace root's too, ``pyvenv.cfg`` or not.

A folder holding ``pyvenv.cfg``, ``conda-meta/``, or ``bin/python*`` with
``lib/python3*/site-packages`` is one; at the workspace root only its own parts
(``bin``, ``lib``, ``pyvenv.cfg``, ``conda-meta``) are held, the rest stays work.
Before: only a folder with ``pyvenv.cfg`` below the root counted, so a ``.pth``
a command wrote in ``python -m venv .``'s, ``conda create -p ./env``'s, pixi's
``.pixi/envs/default``'s or a standalone interpreter copy's site-packages ran at
the user's next start of its python, on the host.
"""

from __future__ import annotations

import pytest

LAYOUTS = {
    "venv-at-the-root": (".", "pyvenv.cfg"),
    "conda-prefix": ("env", "conda-meta/history"),
    "pixi": (".pixi/envs/default", "conda-meta/history"),
    "standalone-copy": ("py", None),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_pth_is_never_written_in_an_environment_of_the_workspace(runner, layout):
    where, mark = LAYOUTS[layout]
    env = runner.ws / where
    site = env / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (env / "bin").mkdir()
    (env / "bin" / "python3").write_text("#!/bin/sh\n")
    if mark:
        (env / mark).parent.mkdir(parents=True, exist_ok=True)
        (env / mark).write_text("home = /usr/bin\n")
    runner.chown(runner.ws)
    out = runner.run(f"echo 'import os' > {site.relative_to(runner.ws)}/evil.pth; echo work > work.txt; echo done")
    assert "done" in out and not (site / "evil.pth").exists(), out
    assert (runner.ws / "work.txt").read_text() == "work\n", out  # the workspace around it stays the agent's
