"""The README and the docs pages read in short units, and each page says first what it is for.

No paragraph, list bullet or table cell has more than 150 words. A reader
skims: a unit of text past about 150 words hides the one fact they came for
(one bullet of the CLI page once ran to 891 words). Code blocks and HTML
comments are not prose and are not counted. Tables are exempt as a whole (a
row of several cells can be long), but each cell is one unit of text and is
held to the same limit. A bullet's own paragraphs, separated by blank lines,
and its nested bullets each count on their own.

Each page opens, right under its title, with a paragraph saying what the
reader will be able to do with it, before any code, table or section.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 150

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.M | re.S)
COMMENT = re.compile(r"<!--.*?-->", re.S)
BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
LINK = re.compile(r"\]\([^)]*\)")  # a link's target is not read as words


def words(text: str) -> int:
    return sum(1 for token in LINK.sub("]", text).split() if re.search(r"\w", token))


def long_units(text: str) -> list[tuple[int, int, str]]:
    """``(line, words, opening)`` of each paragraph, bullet or table cell of ``text`` over the limit."""
    # Blank out code and comments line for line, so the line numbers stay those of the page.
    text = FENCE.sub(lambda m: "\n" * m.group().count("\n"), text)
    text = COMMENT.sub(lambda m: "\n" * m.group().count("\n"), text)
    units: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0

    def close() -> None:
        if current:
            units.append((start, " ".join(current)))
            current.clear()

    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            close()
            units.append((number, stripped))
        elif stripped.startswith("|"):
            close()
            units.extend((number, cell) for cell in stripped.strip("|").split("|"))
        else:
            if BULLET.match(line):
                close()
                stripped = BULLET.sub("", line)  # the marker ("1.") is not a word
            if not current:
                start = number
            current.append(stripped)
    close()
    return [(line, n, unit[:60]) for line, unit in units if (n := words(unit)) > LIMIT]


def test_the_counter_finds_a_long_paragraph_bullet_and_cell_and_skips_code() -> None:
    long = " ".join(["word"] * (LIMIT + 1))
    short = " ".join(["word"] * 100)
    page = "\n".join([
        "# Title", "", short, short, "",  # one paragraph of two lines: 200 words
        f"- {short}", f"- {short}", "",  # two bullets of 100
        f"| {short} | {short} |", "|---|---|", f"| {long} | x |", "",  # long rows; one long cell
        "```text", long, "```", "",
        f"<!-- {long} -->", "",
        f"1. {short}", f"   {short}", "",  # one numbered bullet on two lines: 200 words
        f"[{short}]({'a ' * 60})", "",  # a link's target is not counted
    ])
    assert [(line, n) for line, n, _ in long_units(page)] == [(3, 200), (11, LIMIT + 1), (19, 200)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_paragraph_bullet_or_table_cell_has_more_than_150_words(page: Path) -> None:
    name = page.relative_to(ROOT).as_posix()
    found = [f"{name}:{line}: {n} words: {opening!r}" for line, n, opening in long_units(page.read_text("utf-8"))]
    assert found == [], "split these into shorter paragraphs, bullets or sections:\n" + "\n".join(found)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_page_opens_with_a_paragraph_under_its_title(page: Path) -> None:
    name = page.relative_to(ROOT).as_posix()
    lines = [line for line in page.read_text("utf-8").splitlines() if line.strip()]
    assert lines[0].startswith("# "), f"{name} starts without a title"
    assert not lines[1].lstrip().startswith(("#", "```", "|", "- ", "* ", "<!--", "!!!", ">", ":::")), (
        f"{name}: the first thing under the title is {lines[1][:40]!r}, not the task the page helps with"
    )
