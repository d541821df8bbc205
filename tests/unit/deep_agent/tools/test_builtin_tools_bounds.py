"""The built-in tools' bounds hold against inputs just past them: no call runs away in time or memory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deep_agent.tools import _search as search, builtin_tools


def tools(root: Path) -> dict:
    return {t.name: t for t in builtin_tools(root)}


def sparse(path: Path, size: int) -> Path:
    with path.open("wb") as handle:
        handle.truncate(size)  # all NUL bytes, no newline: one endless line
    return path


@pytest.mark.parametrize("pattern", ["(?:a{1000}){1000}", "a{1000000}"])
def test_grep_refuses_a_pattern_whose_repeats_would_compile_without_end(tmp_path: Path, pattern: str) -> None:
    # Compiling copies each counted repeat, and no timeout bounds it: (?:(?:a{1000}){1000}){1000} took all memory.
    (tmp_path / "a.txt").write_text("aaa\n", encoding="utf-8")
    result = tools(tmp_path)["Grep"].invoke({"pattern": pattern})
    assert "its repeats would compile to about" in result and repr(pattern) in result


@pytest.mark.parametrize("pattern", [r"\d{4}-\d{2}-\d{2}", r"[0-9]{1,3}(\.[0-9]{1,3}){3}", r"\p{L}{2,}", "x{2,}"])
def test_grep_keeps_ordinary_counted_repeats(tmp_path: Path, pattern: str) -> None:
    (tmp_path / "a.txt").write_text("2024-01-02 10.0.0.1 xx\n", encoding="utf-8")
    assert tools(tmp_path)["Grep"].invoke({"pattern": pattern}) == "a.txt"


def test_grep_stops_at_its_deadline_when_each_line_is_fast(tmp_path: Path, monkeypatch) -> None:
    # Millions of short lines: no single search times out, the call as a whole must.
    monkeypatch.setattr(search, "GREP_SECONDS", 0.3)
    for i in range(6):
        (tmp_path / f"many{i}.txt").write_text("ab\n" * 600_000, encoding="utf-8")
    result = tools(tmp_path)["Grep"].invoke({"pattern": "q"})
    assert "took more than 0.3 s" in result  # stopped at its deadline: a search run to its end says nothing


def test_grep_reads_no_more_than_its_bound_of_a_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(search, "MAX_FILE_BYTES", 10)
    (tmp_path / "small.txt").write_text("needle\n", encoding="utf-8")
    (tmp_path / "big.txt").write_text("needle\n" * 3, encoding="utf-8")
    assert tools(tmp_path)["Grep"].invoke({"pattern": "needle"}) == "small.txt"


def test_read_of_one_endless_line_stops_and_says_so(tmp_path: Path) -> None:
    sparse(tmp_path / "huge.bin", 4 * 10**9)
    result = tools(tmp_path)["Read"].invoke({"file_path": "huge.bin", "limit": 1})
    assert result.startswith("     1\t") and "[line truncated]" in result
    assert "stopped reading after 100,000,000 characters" in result


def test_read_past_the_scan_bound_is_a_result_not_a_wait(tmp_path: Path) -> None:
    sparse(tmp_path / "huge.bin", 4 * 10**9)
    result = tools(tmp_path)["Read"].invoke({"file_path": "huge.bin", "offset": 5})
    assert result.startswith("... [stopped reading after")


def test_edit_refuses_a_file_too_big_to_hold_naming_it(tmp_path: Path) -> None:
    sparse(tmp_path / "big.txt", 30_000_000)
    result = tools(tmp_path)["Edit"].invoke({"file_path": "big.txt", "old_string": "a", "new_string": "b"})
    assert result.startswith("file_path 'big.txt' is over 20,000,000 bytes")


def test_edit_still_reads_crlf_files_as_text_mode_did(tmp_path: Path) -> None:
    (tmp_path / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    result = tools(tmp_path)["Edit"].invoke({"file_path": "w.txt", "old_string": "one\ntwo", "new_string": "x"})
    assert result.startswith("Edited w.txt")
    assert (tmp_path / "w.txt").read_bytes() == b"x\n"


def deep_tree(root: Path) -> None:
    chain = root
    for i in range(40):
        chain = chain / f"d{i}"
    chain.mkdir(parents=True)
    for i in range(50):
        (root / f"w{i}" / "x" / "y").mkdir(parents=True)


def listings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many folders are listed from now on (``[count]``): a tree walked once lists each of its folders once."""
    listed, scandir = [0], os.scandir

    def counting(*args, **kwargs):
        listed[0] += 1
        return scandir(*args, **kwargs)

    monkeypatch.setattr(os, "scandir", counting)
    return listed


FOLDERS = 1 + 40 + 50 * 3  # deep_tree's, with its root


def test_glob_with_repeated_star_stars_walks_the_tree_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each '**' walked the tree again below every folder matched before it: x10 per '**' here (minutes),
    # and the match bound never fired (a path is listed once).
    deep_tree(tmp_path)
    glob = tools(tmp_path)["Glob"]
    expected = glob.invoke({"pattern": "**/*"})
    listed = listings(monkeypatch)
    assert glob.invoke({"pattern": "**/**/**/**/**/*"}) == expected
    assert listed == [FOLDERS]


def test_glob_with_many_separate_star_stars_still_walks_the_tree_once(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # Path.glob walked the tree again below every folder each '**' matched (minutes); the walk carries states.
    deep_tree(tmp_path)
    glob = tools(tmp_path)["Glob"]
    listed = listings(monkeypatch)
    assert glob.invoke({"pattern": "**/*/**/*/**/*/**/*"}) == glob.invoke({"pattern": "*/*/*/**/*"})
    assert listed == [2 * FOLDERS]  # each of the two globs walked the tree once
    assert glob.invoke({"pattern": "**/d3/**/d5"}) == "/".join(f"d{i}" for i in range(6))


def test_glob_refuses_a_pattern_that_climbs_out_of_the_workspace(tmp_path: Path) -> None:
    # Matches outside were dropped, but the walk still went through them: '../../**/*' walked the disk.
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("x", encoding="utf-8")
    (tmp_path / "outside.txt").write_text("x", encoding="utf-8")
    glob = tools(root)["Glob"]
    for pattern in ("../*", "../ws/../../**/*", "**/../../*"):
        assert glob.invoke({"pattern": pattern}).startswith(f"pattern {pattern!r} climbs out of the workspace")
    assert glob.invoke({"pattern": "../a.txt", "path": "sub"}).endswith("a.txt")
    assert glob.invoke({"pattern": "sub/../*.txt"}).endswith("a.txt")
