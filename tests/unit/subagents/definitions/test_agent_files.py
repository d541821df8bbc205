"""Agent files: parsing, every bad case named, precedence, the built child, the CLI."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from langchain_core.tools import tool

from helpers.graphs import records, tool_messages, user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import AgentFileError, SpecError, discover_agents, load_agent_dirs, load_agent_file
from subagents._errors import DefinitionFileWarning
from helpers.agent_files import BAD, DETAIL, GOOD, SKILLS, agent_md, write
from helpers.agent_files import BAD_CASES
from subagents._settings import DelegationSettings


# -- parsing ------------------------------------------------------------------


def test_claude_code_style_file_loads_with_every_field_read():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean Claude file raises no warning
        spec = load_agent_file(GOOD / "code-reviewer.md")
    assert spec.name == "code-reviewer"
    assert spec.tools == ("Read", "Write", "Grep")
    assert spec.model == "sonnet" and spec.max_turns == 6 and spec.color == "blue"
    assert spec.permission_mode == "confirm_risky"  # Claude's acceptEdits
    assert spec.system_prompt.startswith("You are a meticulous code reviewer.")
    assert spec.source == str(GOOD / "code-reviewer.md")


def test_my_pi_agent_style_fields_and_spellings():
    spec = load_agent_file(GOOD / "researcher.md")
    assert spec.tools == ("search", "fetch") and spec.disallowed_tools == ("fetch",)
    assert spec.skills == ("cite-sources", "git-diff")
    assert spec.max_turns == 8 and spec.max_budget_per_run == 0.5 and spec.timeout_s == 90
    assert spec.permission_mode == "never_confirm" and spec.model == "inherit"
    assert spec.mcp_config["github"]["args"] == ["--read-only"]
    assert spec.mcp_config["docs"] == {"url": "https://docs.example.com/mcp"}
    assert spec.condenser == {"trigger": ("tokens", 40000), "keep": ("messages", 10)}
    assert spec.hooks["PreToolUse"][0]["matcher"] == "search"
    assert spec.description == "Finds facts with <sources> & cites them."


def test_stem_is_the_default_name_and_unknown_fields_warn_into_metadata():
    with pytest.warns(DefinitionFileWarning) as caught:
        spec = load_agent_file(GOOD / "summarizer.md")
    assert spec.name == "summarizer" and spec.tools == () and spec.condenser is False
    assert spec.metadata == {"effort": "low", "memory": "project"}
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 2 and "unknown field 'effort'" in messages[0]


def test_deprecated_mcp_servers_alias_and_claude_list_form():
    with pytest.warns(DefinitionFileWarning, match="'mcpServers' is a deprecated alias; use 'mcp_config'"):
        spec = load_agent_file(GOOD / "legacy-mcp.md")
    assert spec.mcp_config == {"slack": {}, "files": {"command": "python3", "args": ["."]}}
    assert spec.permission_mode == "never_confirm"  # bypassPermissions


def test_bom_crlf_and_cr_line_ends_load_the_same(tmp_path):
    text = (GOOD / "code-reviewer.md").read_text(encoding="utf-8")
    expected = load_agent_file(GOOD / "code-reviewer.md")
    for label, data in {
        "bom": b"\xef\xbb\xbf" + text.encode(),
        "crlf": text.replace("\n", "\r\n").encode(),
        "bom-crlf": b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode(),
        "cr": text.replace("\n", "\r").encode(),
    }.items():
        path = tmp_path / label / "code-reviewer.md"
        path.parent.mkdir()
        path.write_bytes(data)
        spec = load_agent_file(path)
        assert spec.model_dump(exclude={"source"}) == expected.model_dump(exclude={"source"}), label


def test_comma_lists_keep_parenthesised_arguments_together(tmp_path):
    path = write(tmp_path / "a.md", agent_md("a", extra="tools: Read, Bash(git add, git commit), Grep\n"))
    assert load_agent_file(path).tools == ("Read", "Bash(git add, git commit)", "Grep")


def test_every_bad_fixture_has_a_case():
    assert {p.stem for p in BAD.glob("*.md")} == {name for name, _, _ in BAD_CASES}
    assert len(BAD_CASES) >= 20


@pytest.mark.parametrize(("name", "field", "message"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_file_raises_one_error_naming_file_field_and_expectation(name, field, message):
    path = BAD / f"{name}.md"
    with pytest.raises(AgentFileError) as info:
        load_agent_file(path)
    err = info.value
    assert err.path == str(path) and err.field == field
    text = str(err)
    assert text.startswith(f"{path}: " + (f"field '{field}': " if field else ""))
    assert message in text


def test_non_utf8_file_and_invalid_stem(tmp_path):
    latin = tmp_path / "latin.md"
    latin.write_bytes(b"---\ndescription: caf\xe9\n---\nBody.\n")
    with pytest.raises(AgentFileError, match=r"latin.md: is not valid UTF-8 \(byte 0xe9 at offset 20\)"):
        load_agent_file(latin)
    stem = write(tmp_path / "my agent.md", "---\ndescription: d\n---\nBody.\n")
    with pytest.raises(AgentFileError, match="field 'name': missing, and the file stem 'my agent'"):
        load_agent_file(stem)


def test_a_directory_with_bad_files_reports_every_one():
    with pytest.raises(SpecError) as info:
        load_agent_dirs([BAD])
    text = str(info.value)
    assert text.startswith(f"{len(BAD_CASES)} invalid definition files:")
    assert all(f"{name}.md" in text for name, _, _ in BAD_CASES)


# -- discovery and precedence -------------------------------------------------


def test_project_overrides_user_and_both_levels_are_searched(tmp_path):
    project, home = tmp_path / "project", tmp_path / "home"
    write(project / ".claude/agents/reviewer.md", agent_md("reviewer", "project reviewer"))
    write(home / ".agents/agents/reviewer.md", agent_md("reviewer", "user reviewer"))
    write(home / ".claude/agents/helper.md", agent_md("helper", "user helper"))
    report = discover_agents(project_dir=project, home=home)
    assert report.ok
    assert {s.name: s.description for s in report.values} == {
        "reviewer": "project reviewer",
        "helper": "user helper",
    }
    ((lost, winner),) = report.shadowed
    assert lost.path == home / ".agents/agents/reviewer.md"
    assert winner.path == project / ".claude/agents/reviewer.md"


def test_same_name_twice_at_one_level_is_an_error_naming_both_files(tmp_path):
    project = tmp_path / "project"
    first = write(project / ".agents/agents/reviewer.md", agent_md("reviewer"))
    second = write(project / ".claude/agents/reviewer.md", agent_md("reviewer"))
    report = discover_agents(project_dir=project, home=tmp_path / "nohome")
    with pytest.raises(AgentFileError) as info:
        report.raise_for_problems()
    assert str(first) in str(info.value) and str(second) in str(info.value)
    assert "at the same level" in str(info.value)
    # Within one directory too, whatever the file names.
    one_dir = tmp_path / "one"
    write(one_dir / "a.md", agent_md("same"))
    write(one_dir / "b.md", agent_md("same"))
    with pytest.raises(AgentFileError, match=r"b\.md: defines agent 'same', which .*a\.md also defines"):
        load_agent_dirs([one_dir])


def test_explicit_levels_first_wins_and_a_group_is_one_level(tmp_path):
    a, b, c = (tmp_path / n for n in "abc")
    write(a / "x.md", agent_md("x", "from a"))
    write(b / "x.md", agent_md("x", "from b"))
    write(c / "x.md", agent_md("x", "from c"))
    assert discover_agents([a, b]).values[0].description == "from a"
    assert discover_agents([b, a]).values[0].description == "from b"
    assert not discover_agents([[a, b], c]).ok


def test_missing_named_directory_is_an_error_default_ones_are_skipped(tmp_path):
    with pytest.raises(AgentFileError, match="nowhere: is not a directory of agents"):
        load_agent_dirs([tmp_path / "nowhere"])
    assert discover_agents(project_dir=tmp_path, home=tmp_path).values == []


def test_a_file_reached_twice_counts_once_and_readme_is_skipped(tmp_path):
    real = tmp_path / "real"
    write(real / "a.md", agent_md("a"))
    write(real / "README.md", "# Our agents\n")
    (tmp_path / "link").symlink_to(real)
    assert [s.name for s in load_agent_dirs([[real, tmp_path / "link"]])] == ["a"]


# -- the built child ----------------------------------------------------------


@tool
def Read(path: str) -> str:  # noqa: N802 - Claude Code's tool names
    """Read a file."""
    return f"contents of {path}"


@tool
def Write(path: str) -> str:  # noqa: N802
    """Write a file."""
    return f"wrote {path}"


@tool
def Grep(pattern: str) -> str:  # noqa: N802
    """Search files."""
    return f"matches for {pattern}"


@tool
def Bash(command: str) -> str:  # noqa: N802
    """Run a command."""
    return f"ran {command}"


def child_calls(model: ScriptedChatModel, description: str) -> list[dict]:
    return [c for c in model.calls if any(m.text == description for m in c["messages"][:2])]


def test_claude_file_resolves_its_model_through_the_mapping_and_filters_tools(run):
    parent = ScriptedChatModel(
        responses=[{"tool_calls": [tool_call("task", description="Review it", subagent_type="code-reviewer")]},
                   "parent done"]
    )
    sonnet = ScriptedChatModel(rules=[("Review it", ["No problems found." + DETAIL])])
    with pytest.warns(DefinitionFileWarning):  # the other good fixtures' unknown fields
        agent = create_deep_agent(
            parent, [Read, Write, Grep, Bash], settings=DelegationSettings.of(
                agents_dirs=[GOOD], skills_dirs=[SKILLS], general_purpose=False,
                model_profiles={"sonnet": sonnet, "haiku": "inherit"}, unknown_tools="error",
            ),
        )
    out = run(agent, user("go"))
    assert tool_messages(out)[0].content.startswith("No problems found.")
    assert sonnet.calls and not child_calls(parent, "Review it")
    assert sonnet.calls[0]["tools"] == ["Read", "Write", "Grep"]
    assert sonnet.calls[0]["system"].startswith("You are a meticulous code reviewer.")


def test_unresolvable_profile_is_an_error_unless_the_caller_falls_back(tmp_path):
    write(tmp_path / "r.md", agent_md("r", extra="model: sonnet\n"))
    with pytest.raises(SpecError, match="subagent 'r': field 'model' 'sonnet' is not 'inherit'"):
        create_deep_agent(ScriptedChatModel(), settings=DelegationSettings.of(agents_dirs=[tmp_path]))
    model = ScriptedChatModel(
        rules=[("job", ["inherited answer." + DETAIL])],
        responses=[{"tool_calls": [tool_call("task", description="job", subagent_type="r")]}, "done"],
    )
    agent = create_deep_agent(model, settings=DelegationSettings.of(agents_dirs=[tmp_path], unknown_model="inherit"))
    assert tool_messages(agent.invoke(user("go")))[0].content.startswith("inherited answer.")


def test_deny_wins_unknown_tools_never_widen_and_empty_allow_list_means_no_tools(tmp_path, run):
    write(tmp_path / "deny.md", agent_md("deny", extra="tools: [Read, Grep, task]\ndisallowedTools: Grep\n"))
    write(tmp_path / "ghost.md", agent_md("ghost", extra="tools: NotThere\n"))
    model = ScriptedChatModel(
        rules=[("deny job", ["denied." + DETAIL]), ("ghost job", ["ghost." + DETAIL])],
        responses=[{"tool_calls": [tool_call("task", description="deny job", subagent_type="deny"),
                                   tool_call("task", description="ghost job", subagent_type="ghost")]},
                   "done"],
    )
    agent = create_deep_agent(model, [Read, Grep, Bash], settings=DelegationSettings.of(agents_dirs=[tmp_path]))
    with pytest.warns(UserWarning, match="'ghost': field 'tools' names 'NotThere'"):
        run(agent, user("go"))
    assert child_calls(model, "deny job")[0]["tools"] == ["Read"]
    assert child_calls(model, "ghost job")[0]["tools"] == []


@pytest.mark.parametrize("policy", ["error", "ignore"])
def test_unknown_tool_policy_error_fails_the_task_ignore_stays_silent(tmp_path, policy):
    write(tmp_path / "ghost.md", agent_md("ghost", extra="tools: [Read, NotThere]\n"))
    model = ScriptedChatModel(
        rules=[("ghost job", ["ghost." + DETAIL])],
        responses=[{"tool_calls": [tool_call("task", description="ghost job", subagent_type="ghost")]}, "done"],
    )
    agent = create_deep_agent(model, [Read], settings=DelegationSettings.of(
        agents_dirs=[tmp_path], unknown_tools=policy,
    ))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = agent.invoke(user("go"))
    (record,) = records(out)
    if policy == "error":
        assert record["status"] == "error"
        assert "field 'tools' names 'NotThere', which the parent does not have" in record["error"]
    else:
        assert record["status"] == "completed"
        assert child_calls(model, "ghost job")[0]["tools"] == ["Read"]


def test_max_turns_from_the_file_limits_the_child(tmp_path, run):
    write(tmp_path / "short.md", agent_md("short", extra="maxTurns: 1\n"))
    model = ScriptedChatModel(
        rules=[("loop", [{"tool_calls": [tool_call("Read", path="a")]}, "never reached"])],
        responses=[{"tool_calls": [tool_call("task", description="loop", subagent_type="short")]}, "done"],
    )
    out = run(create_deep_agent(model, [Read], settings=DelegationSettings.of(agents_dirs=[tmp_path])), user("go"))
    (record,) = records(out)
    assert record["status"] == "error" and "max_turns limit (1 model calls)" in record["error"]


def _condenser_run(tmp_path: Path, condenser_line: str) -> ScriptedChatModel:
    @tool
    def fetch(url: str) -> str:
        """Fetch a page."""
        return "word " * 3000  # about 3.7k tokens: 20 pages pass the default trigger

    pages = iter(range(20))

    def child(messages: list) -> object:
        page = next(pages, None)
        if page is None:
            return "Read the pages." + DETAIL
        return {"tool_calls": [tool_call("fetch", url=f"page-{page}")]}

    write(tmp_path / "reader.md", agent_md("reader", extra=condenser_line))
    model = ScriptedChatModel(
        rules=[
            ("Messages to summarize", ["SUMMARY: fetched pages so far."]),
            ("summary of the conversation", [child] * 40),
            ("Read the pages", [child] * 40),
        ],
        responses=[{"tool_calls": [tool_call("task", description="Read the pages", subagent_type="reader")]},
                   "done"],
    )
    out = create_deep_agent(model, [fetch], settings=DelegationSettings.of(agents_dirs=[tmp_path])).invoke(user("go"))
    assert tool_messages(out)[0].content.startswith("Read the pages.")
    return model


def summary_requests(model: ScriptedChatModel) -> int:
    """Child model calls that saw a condensed history (a summary in place of old turns)."""
    marker = "Here is a summary of the conversation to date"
    return sum(any(marker in m.text for m in c["messages"]) for c in model.calls)


def test_default_condenser_summarises_only_a_large_context_and_none_turns_it_off(tmp_path):
    assert summary_requests(_condenser_run(tmp_path / "default", "")) >= 1
    assert summary_requests(_condenser_run(tmp_path / "off", "condenser: none\n")) == 0
    large = _condenser_run(tmp_path / "large", "condenser: {trigger: [tokens, 200000]}\n")
    assert summary_requests(large) == 0
    eager = _condenser_run(tmp_path / "eager", "condenser: {trigger: [messages, 6], keep: [messages, 2]}\n")
    assert summary_requests(eager) > summary_requests(_condenser_run(tmp_path / "d2", ""))


# -- the parent's <available_agents> block ------------------------------------


def test_parent_lists_file_agents_by_name_and_escaped_description_only(tmp_path):
    write(tmp_path / "r.md", agent_md("r", "Finds <facts> & \"quotes\"", body="SECRET CHILD PROMPT"))
    model = ScriptedChatModel(default="done")
    create_deep_agent(model, settings=DelegationSettings.of(agents_dirs=[tmp_path], general_purpose=False)).invoke(user("go"))
    system = model.calls[0]["system"]
    assert "<available_agents>\n- r: Finds &lt;facts&gt; &amp; \"quotes\"\n</available_agents>" in system
    assert "SECRET CHILD PROMPT" not in system
    empty = ScriptedChatModel(default="done")
    create_deep_agent(empty, settings=DelegationSettings.of(agents_dirs=[], general_purpose=False)).invoke(user("go"))
    assert "<available_agents>" not in empty.calls[0]["system"]


def test_a_name_in_both_code_and_files_is_an_error_naming_the_file(tmp_path):
    path = write(tmp_path / "r.md", agent_md("r"))
    with pytest.raises(SpecError, match=f"{path}: subagent 'r' is also passed in subagents="):
        create_deep_agent(ScriptedChatModel(), subagents=[{"name": "r", "description": "d"}],
        settings=DelegationSettings.of(agents_dirs=[tmp_path]))
