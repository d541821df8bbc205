"""The command line's built-in tools: Claude Code's names and arguments, confined to the workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from deep_agent.tools import BUILTIN_TOOL_NAMES, RISKY_TOOLS, Workspace, builtin_tools, tools_not_provided
from subagents import SubagentSpec


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("x = 1\ny = 2\nx = 1\n", encoding="utf-8")
    (root / "notes.txt").write_text("teh notes\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("top secret\n", encoding="utf-8")
    return root


def tools(root: Path, **kw) -> dict:
    return {t.name: t for t in builtin_tools(Workspace(root, **kw))}


def test_the_seven_tools_have_claude_codes_names_and_arguments(ws):
    by_name = tools(ws)
    assert tuple(by_name) == BUILTIN_TOOL_NAMES
    expected = {
        "Read": {"file_path", "offset", "limit"}, "Write": {"file_path", "content"},
        "Edit": {"file_path", "old_string", "new_string", "replace_all"}, "Glob": {"pattern", "path"},
        "Grep": {"pattern", "path", "glob", "output_mode"}, "LS": {"path"}, "Bash": {"command", "timeout"},
    }
    assert {name: set(t.args) for name, t in by_name.items()} == expected
    assert RISKY_TOOLS == {"Write", "Edit", "Bash"}


@pytest.mark.parametrize("tool, args", [
    ("Read", {"file_path": "../secret.txt"}),
    ("Read", {"file_path": "{outside}/secret.txt"}),
    ("Write", {"file_path": "../evil.txt", "content": "x"}),
    ("Edit", {"file_path": "../secret.txt", "old_string": "top", "new_string": "no"}),
    ("LS", {"path": ".."}),
    ("Grep", {"pattern": "secret", "path": ".."}),
    ("Glob", {"pattern": "*", "path": "src/../.."}),
])
def test_a_path_outside_the_workspace_is_refused(ws, tool, args):
    args = {k: v.format(outside=ws.parent) if isinstance(v, str) else v for k, v in args.items()}
    result = tools(ws)[tool].invoke(args)
    assert "outside the workspace" in result
    assert (ws.parent / "secret.txt").read_text() == "top secret\n"
    assert not (ws.parent / "evil.txt").exists()


def test_symlinks_cannot_lead_out_of_the_workspace(ws):
    (ws / "link.txt").symlink_to(ws.parent / "secret.txt")
    (ws / "linkdir").symlink_to(ws.parent, target_is_directory=True)
    t = tools(ws)
    assert "outside the workspace" in t["Read"].invoke({"file_path": "link.txt"})
    assert "outside the workspace" in t["Write"].invoke({"file_path": "linkdir/new.txt", "content": "x"})
    assert "outside the workspace" in t["Edit"].invoke(
        {"file_path": "link.txt", "old_string": "top", "new_string": "no"})
    assert "secret" not in t["Grep"].invoke({"pattern": "top secret", "output_mode": "content"})
    assert "secret.txt" not in t["Glob"].invoke({"pattern": "**/*.txt"})
    assert not (ws.parent / "new.txt").exists()


def test_glob_patterns_with_dot_dot_list_nothing_outside(ws):
    assert "secret" not in tools(ws)["Glob"].invoke({"pattern": "../*"})


def test_read_numbers_lines_and_honours_offset_and_limit(ws):
    out = tools(ws)["Read"].invoke({"file_path": "src/app.py", "offset": 2, "limit": 1})
    assert out == "     2\ty = 2"
    assert "no such file" in tools(ws)["Read"].invoke({"file_path": "nope.py"})


def test_edit_replaces_exactly_one_occurrence_unless_asked_for_all(ws):
    edit = tools(ws)["Edit"]
    ambiguous = edit.invoke({"file_path": "src/app.py", "old_string": "x = 1", "new_string": "x = 3"})
    assert "occurs 2 times" in ambiguous and (ws / "src/app.py").read_text().count("x = 1") == 2
    assert "not found" in edit.invoke({"file_path": "src/app.py", "old_string": "zzz", "new_string": "q"})
    assert "same" in edit.invoke({"file_path": "src/app.py", "old_string": "y", "new_string": "y"})
    edit.invoke({"file_path": "src/app.py", "old_string": "x = 1", "new_string": "x = 3", "replace_all": True})
    assert (ws / "src/app.py").read_text() == "x = 3\ny = 2\nx = 3\n"


def test_write_creates_folders_inside_the_workspace(ws):
    out = tools(ws)["Write"].invoke({"file_path": "docs/new.md", "content": "# Hi\n"})
    assert out.startswith("Created docs/new.md") and (ws / "docs/new.md").read_text() == "# Hi\n"


def test_grep_modes_and_glob_filter(ws):
    grep = tools(ws)["Grep"]
    assert grep.invoke({"pattern": "x = "}) == "src/app.py"
    assert grep.invoke({"pattern": "x = ", "output_mode": "count"}) == "src/app.py:2"
    assert grep.invoke({"pattern": "teh", "output_mode": "content"}) == "notes.txt:1:teh notes"
    assert grep.invoke({"pattern": "teh", "glob": "*.py"}) == "no matches"
    assert "not a valid regular expression" in grep.invoke({"pattern": "("})
    # re.compile raises OverflowError and RecursionError for these, not re.error
    assert "not a valid regular expression" in grep.invoke({"pattern": "a{99999999999}"})
    assert "nests too deeply" in grep.invoke({"pattern": "(?:" * 600 + "a" + ")" * 600})


def test_output_is_bounded(ws):
    (ws / "big.txt").write_text("a" * 5000 + "\n", encoding="utf-8")
    out = tools(ws, max_output_chars=100)["Bash"].invoke({"command": "cat big.txt"})
    assert len(out) < 200 and "output truncated" in out


def test_bash_runs_in_the_workspace_and_is_killed_at_its_timeout(ws):
    bash = tools(ws)["Bash"]
    assert bash.invoke({"command": "pwd"}).strip() == str(ws.resolve())
    assert "[exit code 3]" in bash.invoke({"command": "exit 3"})
    out = bash.invoke({"command": "sleep 5; echo late", "timeout": 300})
    assert "killed after 0.3s timeout" in out and "late" not in out


def test_a_missing_workspace_is_an_error(tmp_path):
    with pytest.raises(NotADirectoryError, match="not a directory"):
        Workspace(tmp_path / "nope")


def test_tools_no_builtin_provides_are_named_with_their_agents():
    specs = [
        SubagentSpec(name="a", description="d", system_prompt="p", tools=["Read", "WebFetch", "Bash(git diff:*)"]),
        SubagentSpec(name="b", description="d", system_prompt="p", tools=["WebFetch", "mcp__gh__search"]),
        SubagentSpec(name="c", description="d", system_prompt="p"),
    ]
    assert tools_not_provided(specs) == {"WebFetch": ["a", "b"], "mcp__gh__search": ["b"]}


def test_mcp_tools_of_a_server_the_agent_file_defines_are_not_named_as_missing():
    server = {"command": "calc-server"}
    specs = [
        SubagentSpec(name="a", description="d", system_prompt="p", tools=["mcp__calc", "mcp__calc__add"],
                     mcp_config={"calc": server}),
        SubagentSpec(name="b", description="d", system_prompt="p", tools=["mcp__*", "mcp__ca*__add"],
                     mcp_config={"calc": server}),
        SubagentSpec(name="c", description="d", system_prompt="p", tools=["mcp__gh__search", "mcp__calc"],
                     mcp_config={"calc": server, "gh": {}}),  # gh is only named: nothing connects it
    ]
    assert tools_not_provided(specs) == {"mcp__gh__search": ["c"]}
