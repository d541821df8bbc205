"""The docs site builds with no broken link, reference or anchor (``mkdocs build --strict``).

The API reference pages are generated from the docstrings, so a renamed or
removed public name breaks this build, not a reader's link.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    pages = {p.parent.name for p in (tmp_path / "site").rglob("index.html")}
    assert {"quickstart", "agent-files", "background", "cli", "migrating", "layout"} <= pages
    assert "create_deep_agent" in (tmp_path / "site" / "reference" / "deep_agent" / "index.html").read_text()
