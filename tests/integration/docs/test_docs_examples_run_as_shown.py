"""Every docs page's examples run as a reader sees them: its visible Python blocks, in order, in one file.

Sybil runs the same blocks, but it would also run setup hidden in an HTML
comment, which the site does not show: a reader copying the examples then
stops at the first block on a ``NameError``. Here each page (and the README)
is cut down to what the site renders, written to one file and run in a fresh
interpreter, offline. A Python block that cannot run (a server's own file)
carries ``<!-- skip: next "why" -->``; that is the only comment allowed
before one, and the test skips exactly that block, as Sybil does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# A page whose examples need a server or a provider key, with why. None so far: keep it short.
EXCEPTED: dict[str, str] = {}

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
SKIP_NEXT = re.compile(r"<!--\s*skip:\s*next\b")


def visible_python(page: Path) -> str:
    """The page's ```python blocks, in order, minus those a ``skip: next`` directive marks."""
    text = page.read_text(encoding="utf-8")
    blocks, skip, at = [], False, 0
    for fence in FENCE.finditer(text):
        skip = skip or bool(SKIP_NEXT.search(text, at, fence.start()))
        at = fence.end()
        if fence.group(1) != "python":
            continue
        if not skip:
            blocks.append(fence.group(2))
        skip = False
    return "\n".join(blocks)


def test_no_page_hides_code_in_an_html_comment() -> None:
    hidden = [
        f"{page.relative_to(ROOT)}: {comment[:60]!r}"
        for page in PAGES
        for comment in re.findall(r"<!--.*?-->", page.read_text(encoding="utf-8"), re.S)
        if not re.fullmatch(r"<!--\s*skip:\s*next\b[^\n]*-->", comment)
    ]
    assert hidden == []


def test_the_skip_filter_drops_only_the_marked_python_block(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\na = 1\n```\n\n"
        '<!-- skip: next "a server" -->\n\n```bash\nls\n```\n\n```python\nb = 2\n```\n\n```python\nc = 3\n```\n'
    )
    assert visible_python(page) == "a = 1\n\nc = 3\n"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_pages_visible_python_blocks_run_in_order_in_one_fresh_file(page: Path, tmp_path: Path) -> None:
    if page.name in EXCEPTED:
        pytest.skip(EXCEPTED[page.name])
    code = visible_python(page)
    if not code:
        pytest.skip("no Python example on this page")
    script = tmp_path / f"{page.stem}.py"
    script.write_text(code, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{page.relative_to(ROOT)} as shown:\n{done.stderr[-3000:]}"
