"""Agent files from anywhere: hostile YAML is a bounded per-file error; published quirks load."""

from __future__ import annotations

import json
import threading
import tracemalloc

import pytest
import yaml

from deep_agent.cli._app import main as cli
from subagents import AgentFileError, discover_agents, load_agent_file
from subagents.definitions._agent_files import parse_agent_file
from helpers.agent_files import agent_md, write
from helpers.background import returns

BOMB_ANCHORS = "\n".join(
    ["  - &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"  - &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
)


def bomb_in_color() -> str:
    return f"---\nname: bomb\ndescription: d\ncolor:\n{BOMB_ANCHORS}\n  - *a9\n---\nBody.\n"


def bomb_in_mcp_args() -> str:
    return (
        "---\nname: bomb\ndescription: d\nmcp_config:\n  files:\n    command: python3\n    args:\n"
        + BOMB_ANCHORS.replace("  - ", "      - ") + "\n      - *a9\n---\nBody.\n"
    )


def bounded(fn):
    """Run ``fn`` and return its value, failing if it uses much memory or never returns (a hang guard, no budget:
    a bomb expanded unbounded is billions of values, hours of work)."""
    tracemalloc.start()
    try:
        value = returns(fn)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 1024 * 1024
    return value


@pytest.mark.parametrize(("text", "field"), [(bomb_in_color(), "color"), (bomb_in_mcp_args(), "mcp_config")],
                         ids=["color", "mcp_config.args"])
def test_an_alias_bomb_is_a_bounded_error_naming_the_file_and_field(tmp_path, text, field):
    path = write(tmp_path / "agents" / "bomb.md", text)
    write(tmp_path / "agents" / "fine.md", agent_md("fine"))
    report = bounded(lambda: discover_agents([tmp_path / "agents"]))
    assert [s.name for s in report.values] == ["fine"]
    (problem,) = report.problems
    assert problem.path == path and problem.error.field == field
    assert "aliases expand to more than 20000 values" in problem.message
    assert len(problem.message) < 400



def test_anchors_under_the_cap_blame_the_field_whose_aliases_go_past_it(tmp_path):
    anchors = "\n".join(BOMB_ANCHORS.splitlines()[:4])  # a0..a3: 8,303 values, under the cap
    path = write(tmp_path / "a.md", f"---\nname: a\ndescription: d\nanchors:\n{anchors}\n"
                                    "color: [*a3, *a3, *a3]\n---\nB\n")
    with pytest.raises(AgentFileError) as info:
        bounded(lambda: load_agent_file(path))
    assert info.value.field == "color" and "frontmatter line 9: its aliases expand to more than 20000" in str(info.value)


def test_a_long_plain_list_is_refused_at_the_cap_not_after_composing_it(tmp_path, monkeypatch):
    composed = []
    plain = yaml.composer.Composer.compose_scalar_node
    monkeypatch.setattr(yaml.composer.Composer, "compose_scalar_node",
                        lambda self, anchor: composed.append(1) or plain(self, anchor))
    path = write(tmp_path / "plain.md", "---\nname: p\ndescription: d\ntools: [" + ",".join(["Read"] * 150_000)
                 + "]\n---\nB\n")
    with pytest.raises(AgentFileError) as info:
        load_agent_file(path)
    assert len(composed) <= 20_001  # of the 150,006 scalars the file holds
    assert info.value.field == "tools"
    assert "frontmatter line 4: holds more than 20000 values" in str(info.value)
    assert "alias" not in str(info.value)


def test_an_alias_inside_its_own_anchor_is_an_error_not_a_hang(tmp_path):
    outcome: list[BaseException] = []

    def load(text: str) -> None:
        try:
            load_agent_file(write(tmp_path / "loop.md", text))
        except AgentFileError as exc:
            outcome.append(exc)

    for value in ("&m {again: *m}", "&l [1, *l]"):
        outcome.clear()
        worker = threading.Thread(target=load, args=(f"---\nname: l\ndescription: d\nmetadata: {value}\n---\nB\n",),
                                  daemon=True)
        worker.start()
        worker.join(60)  # generous: only a loop that never ends is caught
        assert not worker.is_alive(), value
        (error,) = outcome
        assert error.field == "metadata" and "an alias refers to the collection it is in" in str(error)


def test_the_lenient_fallback_holds_the_cap_across_its_fields(tmp_path):
    row = "[" + ",".join(["x"] * 20) + "]"
    fields = [f"k{i}: [&a{i} {row}, &b{i} [{','.join([f'*a{i}'] * 20)}], "
              f"&c{i} [{','.join([f'*b{i}'] * 20)}], [*c{i}]]" for i in range(40)]  # each ~17,300 values
    body = "\n".join(fields) + "\n---\nYou help.\n"
    strict = write(tmp_path / "strict" / "a.md", "---\ndescription: Use when asked\n" + body)
    lenient = write(tmp_path / "lenient" / "a.md", "---\ndescription: Use when: asked\n" + body)
    for path in (strict, lenient):
        with pytest.raises(AgentFileError) as info:
            bounded(lambda path=path: load_agent_file(path))
        assert info.value.field == "k1", path
        assert "frontmatter line 4: its aliases expand to more than 20000 values" in str(info.value)

def test_deep_nesting_is_an_error_naming_the_file_not_a_recursion_error(tmp_path):
    for label, nested in {"flow": "[" * 5000 + "]" * 5000,
                          "block": "".join(f"\n{'  ' * i}k{i}:" for i in range(200)) + " 1"}.items():
        path = write(tmp_path / label / "deep.md", f"---\nname: deep\ndescription: d\nmetadata: {nested}\n---\nB\n")
        report = bounded(lambda: discover_agents([tmp_path / label]))
        (problem,) = report.problems
        assert problem.path == path and "nests deeper than 32 levels" in problem.message, label


def test_a_huge_file_is_refused_before_it_is_read(tmp_path):
    path = write(tmp_path / "big.md", agent_md("big", body="x" * (2 * 1024 * 1024)))
    with pytest.raises(AgentFileError, match=r"big\.md: is larger than 1048576 bytes"):
        bounded(lambda: load_agent_file(path))


def test_error_messages_never_embed_a_long_value(tmp_path):
    wide = "{" + ", ".join(f"k{i}: {i}" for i in range(5000)) + "}"
    path = write(tmp_path / "wide.md", f"---\nname: wide\ndescription: d\ntools: {wide}\n---\nB\n")
    with pytest.raises(AgentFileError) as info:
        load_agent_file(path)
    assert info.value.field == "tools" and len(str(info.value)) < 400


def test_cli_validate_reports_bombs_as_failures_and_stays_bounded(tmp_path, capsys):
    write(tmp_path / "a.md", bomb_in_color())
    write(tmp_path / "b.md", bomb_in_mcp_args().replace("name: bomb", "name: bomb2"))
    write(tmp_path / "c.md", "---\nname: c\ndescription: d\nmetadata: " + "[" * 3000 + "\n---\nB\n")
    assert bounded(lambda: cli(["agents", "validate", str(tmp_path)])) == 1
    out = capsys.readouterr().out
    assert out.count("FAIL ") == 3 and "3 agent file(s): 0 valid, 3 problem(s)" in out



@pytest.mark.parametrize(("raw", "code"), [(b"\x00", "U+0000"), (b"\x07", "U+0007"), (b"\x1b", "U+001B")],
                         ids=["NUL", "BEL", "ESC"])
def test_a_control_character_is_an_error_naming_its_line_field_and_character(tmp_path, raw, code):
    path = tmp_path / "a.md"
    path.write_bytes(b"---\nname: a\ndescription: Reviews" + raw + b" code\nmaxTurns: 5\n---\nB\n")
    with pytest.raises(AgentFileError) as info:
        load_agent_file(path)
    assert info.value.field == "description"
    assert f"frontmatter line 3: the character {code} (a control character) is not allowed" in str(info.value)
    listed = tmp_path / "b.md"
    listed.write_bytes(b"---\nname: b\ndescription: d\ntools:\n  - Read\n  - Gr" + raw + b"ep\n---\nB\n")
    with pytest.raises(AgentFileError) as info:
        load_agent_file(listed)
    assert info.value.field == "tools" and f"frontmatter line 6: the character {code}" in str(info.value)

# -- what published agent files do ------------------------------------------------


def test_an_unquoted_colon_in_a_one_line_value_loads_with_a_warning(tmp_path):
    path = write(tmp_path / "growth.md", (
        "---\nname: growth\n"
        "description: Use when planning growth. Triggers on: 'growth loop', 'funnel'\n"
        "tools:\n  - Read\n  - Grep\nmodel: inherit\n---\nYou plan growth.\n"
    ))
    spec, notes = parse_agent_file(path)
    assert spec.description == "Use when planning growth. Triggers on: 'growth loop', 'funnel'"
    assert spec.tools == ("Read", "Grep") and spec.model == "inherit"
    (note,) = notes
    assert str(path) in note and "frontmatter line 3 is not strict YAML" in note


def test_the_fallback_never_accepts_broken_yaml_lists_or_stray_lines(tmp_path):
    broken = write(tmp_path / "a.md", "---\ndescription: a: b\ntools: [Read, Grep\n---\nB\n")
    with pytest.raises(AgentFileError, match="invalid YAML"):
        load_agent_file(broken)
    stray = write(tmp_path / "b.md", "---\ndescription: a: b\nnot a field\n---\nB\n")
    with pytest.raises(AgentFileError, match="invalid YAML"):
        load_agent_file(stray)


def test_cli_validate_reports_the_fallback_as_warn(tmp_path, capsys):
    write(tmp_path / "g.md", "---\nname: g\ndescription: Triggers on: 'x'\n---\nBody.\n")
    assert cli(["agents", "validate", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ok   " in out and "warn " in out and "not strict YAML" in out


@pytest.mark.parametrize("name", ["dotnet-framework-4.8-expert", "powershell-5.1-expert", "a.b_c-d"])
def test_dotted_names_load_from_the_field_and_from_the_file_stem(tmp_path, name):
    assert load_agent_file(write(tmp_path / "x" / "x.md", agent_md(name))).name == name
    stem = write(tmp_path / "y" / f"{name}.md", "---\ndescription: d\n---\nBody.\n")
    assert load_agent_file(stem).name == name


@pytest.mark.parametrize("name", [".hidden", "a..b", "..", "a.", "a/b", "a\\\\b", "x" * 129])
def test_names_that_could_escape_a_folder_are_refused(tmp_path, name):
    path = write(tmp_path / "n.md", agent_md(f"'{name}'"))
    with pytest.raises(AgentFileError) as info:
        load_agent_file(path)
    assert info.value.field == "name"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_cli_list_shows_metadata_cut_to_size_however_often_aliases_repeat_it(tmp_path, capsys, fmt):
    copies = ", ".join(["*s"] * 2000)  # 2,003 values, under the cap; 20 MB if printed in full
    write(tmp_path / "m.md", f"---\nname: m\ndescription: d\nmetadata: {{long: &s '{'x' * 10_000}', "
                             f"copies: [{copies}]}}\n---\nB\n")
    assert cli(["agents", "list", str(tmp_path), "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert len(out) < 50_000 and "more characters" in out and "more items" in out
    if fmt == "json":
        (row,) = json.loads(out)
        assert row["metadata"]["long"].startswith("x" * 200)


def test_an_integer_too_long_for_python_is_an_error_naming_its_line(tmp_path):
    path = write(tmp_path / "n.md", "---\nname: n\ndescription: d\nmetadata: {n: " + "1" * 5000 + "}\n---\nB\n")
    with pytest.raises(AgentFileError, match="frontmatter line 4: an integer of 5000 characters is too long"):
        load_agent_file(path)
