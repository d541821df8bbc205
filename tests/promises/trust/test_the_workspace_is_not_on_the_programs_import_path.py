"""``python -m deep_agent`` started in the workspace imports nothing from it.

``python -m`` puts the folder it starts in first on ``sys.path``; the program
drops it before importing anything else. Before: a module an installed package
imports lazily and may miss (httpx's optional ``brotli``) was the workspace's
``brotli.py``, which the agent could write, run on the host at the next start.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import deep_agent

PACKAGES = str(Path(deep_agent.__file__).parents[1])


def test_a_module_planted_in_the_workspace_is_never_imported(tmp_path):
    (tmp_path / "brotli.py").write_text("open('brotli-ran', 'w').close()\n")
    done = subprocess.run([sys.executable, "-m", "deep_agent"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": PACKAGES})
    assert not (tmp_path / "brotli-ran").exists()  # the demo imports it (httpx's optional decoder)
    assert done.returncode == 0 and "Final answer" in done.stdout, done.stderr  # and ran to its end
