"""Glob's own walk: the same matches as ``Path.glob``, without entering skipped folders, with a deadline."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deep_agent.tools import builtin_tools
from deep_agent.tools._search import GlobWalk, walkable_from

SKIPPED = frozenset({".git", ".venv", "node_modules", "__pycache__", ".deep_agent"})


def _tree(root: Path) -> Path:
    for relative in ("a.py", "b.txt", ".hidden.py", "d1/a.py", "d1/x.txt", "d1/d2/deep.py", "d1/d2/d3/deeper.txt",
                     "ab/c.py", "ab/.h/secret.py", "node_modules/pkg/index.py", ".git/config", "d1/node_modules/m.py",
                     "sp ace/f.py", "[x]/y.py"):
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x", encoding="utf-8")
    (root / "empty").mkdir()
    (root / "link.py").symlink_to(root / "a.py")
    (root / "d1" / "brok").symlink_to(root / "nowhere")  # a broken symlink
    return root


def _by_path_glob(root: Path, pattern: str) -> set[str]:
    # Path.glob keeps a pattern's '..' in the paths it yields (d1/../a.py); the walk names them plainly.
    return {os.path.normpath(p.relative_to(root)) for p in root.glob(pattern)
            if not any(part in SKIPPED for part in p.relative_to(root).parts)}


def _by_walk(root: Path, pattern: str) -> set[str]:
    start, rest, dirs_only = walkable_from(root, pattern)  # type: ignore[misc]
    walk = GlobWalk(start, rest, dirs_only=dirs_only, skipped=SKIPPED, deadline=float("inf"))
    return {os.path.normpath(p.relative_to(root)) for p in walk
            if not any(part in SKIPPED for part in p.relative_to(root).parts)}


PATTERNS = ["*", "*.py", "**/*.py", "**", "d1/**", "d1/*", "d1/**/*.txt", "**/d2/*", "*/a.py", "?.py", "[ab]*",
            "**/.h*/*", ".*", "d1/d2/deep.py", "no/such/*", "**/*", "a*/**/*.py", "sp ace/*", "[[]x]/*",
            "d1/../*.py", "**/d2/**", "d1", "**/empty", "*/*/*", "*/", "*.py/", "**/", "d1/", "a.py/",
            "nope/../*", "b.txt/../*", "d1/d2/../*.py", "d1/../d1/d2/*", "ab/./*.py", "d1//a.py",
            "*/brok", "d1/brok", "d1/b*", "**/brok"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_the_walk_matches_what_path_glob_matches(tmp_path: Path, pattern: str) -> None:
    root = _tree(tmp_path)
    assert _by_walk(root, pattern) == _by_path_glob(root, pattern)


SEGMENTS = st.sampled_from(["*", "**", "a*", "?", "[ab]*", "d1", "d2", "*.py", "*.txt", ".h*", "x.txt", "*2", "[!a]*",
                            "..", "nope", "a.py", "", "brok"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(SEGMENTS, min_size=1, max_size=4).filter(lambda s: s.count("**") <= 2))
def test_any_pattern_of_these_parts_matches_as_path_glob_does(tmp_path: Path, segments: list[str]) -> None:
    # Four folders deep: a pattern of at most four '..' stays inside this test's own folder. Above it
    # are pytest's folders, whose `*current` symlinks Path.glob enters and the walk (by design) does not.
    root = tmp_path / "a" / "b" / "c" / "d" / "tree"
    if not root.exists():
        root.parent.mkdir(parents=True, exist_ok=True)
        _tree(root)
    pattern = "/".join(segments)
    if not pattern.strip("/") or pattern.startswith("/"):
        return  # refused by both, or absolute
    try:
        walkable_from(root, pattern)
    except ValueError as refused:  # only the '..' after a wildcard that Path.glob would walk, slowly
        assert "'..' may only come before the first wildcard" in str(refused), pattern
        return
    assert _by_walk(root, pattern) == _by_path_glob(root, pattern), pattern


@pytest.fixture()
def listed() -> list[str]:
    """Every folder the process lists while the test runs (an audit hook: the real walk, not a stand-in)."""
    seen: list[str] = []
    watching = threading.local()

    def hook(event: str, args: tuple) -> None:
        if event == "os.scandir" and getattr(watching, "on", False):
            where = args[0] if args and args[0] is not None else "."
            if isinstance(where, int):  # a folder listed by descriptor (os.fwalk): its path
                where = os.readlink(f"/proc/self/fd/{where}")
            seen.append(os.fsdecode(where))

    sys.addaudithook(hook)  # hooks cannot be removed: it only records while the flag is set
    watching.on = True
    yield seen
    watching.on = False


def test_glob_never_enters_skipped_folders(tmp_path: Path, listed: list[str]) -> None:
    root = _tree(tmp_path)
    glob = {t.name: t for t in builtin_tools(root)}["Glob"]
    assert "node_modules" not in glob.invoke({"pattern": "**/*.py"})
    entered = [p for p in listed if any(part in SKIPPED for part in Path(p).parts)]
    assert listed and not entered, entered


def test_a_pattern_without_star_star_walks_no_deeper_than_it_reaches(tmp_path: Path, listed: list[str]) -> None:
    root = _tree(tmp_path)
    glob = {t.name: t for t in builtin_tools(root)}["Glob"]
    assert glob.invoke({"pattern": "d1/*.py"}) == "d1/a.py"
    assert listed and all(Path(p).resolve() == (root / "d1").resolve() for p in listed), listed


def test_glob_stops_at_its_deadline_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from deep_agent.tools import _search as search

    root = _tree(tmp_path)
    monkeypatch.setattr(search, "GLOB_SECONDS", 0)
    result = {t.name: t for t in builtin_tools(root)}["Glob"].invoke({"pattern": "**/*.py"})
    assert result.endswith("[stopped looking after 0 s: narrow the pattern or path]"), result


def test_a_symlinked_folder_is_listed_but_not_entered(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / "linked").symlink_to(root / "d1", target_is_directory=True)
    glob = {t.name: t for t in builtin_tools(root)}["Glob"]
    assert "linked" in glob.invoke({"pattern": "*"}).splitlines()
    assert not any(line.startswith("linked/") for line in glob.invoke({"pattern": "**/*.py"}).splitlines())


def test_patterns_path_glob_refuses_are_refused_alike(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    glob = {t.name: t for t in builtin_tools(root)}["Glob"]
    for pattern in ("a**", "**b/*.py", "d1/x**"):
        with pytest.raises(ValueError, match="'\\*\\*' can only be an entire path component"):
            list(root.glob(pattern))
        assert "'**' can only be an entire path component" in glob.invoke({"pattern": pattern}), pattern


def test_a_deep_folder_of_many_files_is_matched_in_one_step_a_name(tmp_path: Path) -> None:
    # Matching each path against two '**' again from its start cost depth squared a name: a minute here.
    deep = tmp_path
    for _ in range(300):
        deep = deep / "a"
    deep.mkdir(parents=True)
    for i in range(3000):
        (deep / f"f{i}").touch()
    glob = {t.name: t for t in builtin_tools(tmp_path)}["Glob"]
    # A minute before: Glob's own deadline would have cut the walk, and its answer would say so.
    assert glob.invoke({"pattern": "**/a/**/x"}) == "no files match"


def test_a_dot_dot_after_a_wildcard_is_refused_not_walked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each '*/..' multiplied the walk by the number of folders: this one was minutes in a folder of 30.
    for i in range(30):
        (tmp_path / f"f{i}").mkdir()
    glob = {t.name: t for t in builtin_tools(tmp_path)}["Glob"]
    monkeypatch.setattr(os, "scandir", lambda *args, **kwargs: pytest.fail("a refused pattern listed a folder"))
    result = glob.invoke({"pattern": "*/../*/../*/../*/../*/../zz"})
    assert "'..' may only come before the first wildcard" in result
