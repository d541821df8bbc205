"""Skills: discovery, bad SKILL.md files, and exactly the named subset in a child's prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.graphs import user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import SpecError
from subagents.definitions import available_skills_block, discover_skills, load_skill, load_skill_dirs
from subagents._errors import SkillFileError

from helpers.agent_files import SKILLS
from subagents._settings import DelegationSettings
DETAIL = " Details: " + "every step was checked and recorded. " * 6


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def skill_md(name: str | None, description: str = "Does a thing.") -> str:
    name_line = f"name: {name}\n" if name is not None else ""
    return f"---\n{name_line}description: {description}\n---\n# Steps\n"


def test_fixture_skills_are_discovered_with_name_description_and_location():
    catalog = load_skill_dirs([SKILLS])
    assert sorted(catalog) == ["cite-sources", "git-diff", "python-eval"]
    skill = catalog["git-diff"]
    assert skill.description == "Read and explain a git diff; use when reviewing changes."
    assert skill.path == (SKILLS / "git-diff" / "SKILL.md").resolve()
    assert catalog["cite-sources"].name == "cite-sources"  # defaulted from the folder


@pytest.mark.parametrize(
    ("folder", "text", "field", "message"),
    [
        ("Git_Diff", skill_md(None), "name", "expected lower-case letters, digits and single hyphens"),
        ("good-name", skill_md("other-name"), "name", "expected the skill's folder name 'good-name', got 'other-name'"),
        ("no-description", "---\nname: no-description\n---\nBody\n", "description", "required"),
        ("long", skill_md("long", "x" * 1025), "description", "expected at most 1024 characters, got 1025"),
        ("no-frontmatter", "# Just markdown\n", None, "has no frontmatter"),
        ("tagged", "---\ndescription: !!python/name:os.system\n---\n", None, "is not allowed"),
    ],
)
def test_bad_skill_files_name_file_and_field(tmp_path, folder, text, field, message):
    path = write(tmp_path / folder / "SKILL.md", text)
    with pytest.raises(SkillFileError) as info:
        load_skill(path.parent)
    assert info.value.path == str(path) and info.value.field == field
    assert message in str(info.value)


def test_skill_levels_first_wins_and_duplicates_in_one_level_are_errors(tmp_path):
    project, home = tmp_path / "project", tmp_path / "home"
    write(project / ".agents/skills/git-diff/SKILL.md", skill_md("git-diff", "project version"))
    write(home / ".claude/skills/git-diff/SKILL.md", skill_md("git-diff", "user version"))
    report = discover_skills(project_dir=project, home=home)
    assert [s.description for s in report.values] == ["project version"]
    write(project / ".claude/skills/git-diff/SKILL.md", skill_md("git-diff", "clash"))
    report = discover_skills(project_dir=project, home=home)
    with pytest.raises(SkillFileError, match="defines skill 'git-diff', which .* also defines at the same level"):
        report.raise_for_problems()


def test_block_is_xml_escaped_and_empty_for_no_skills():
    block = load_skill_dirs([SKILLS]).prompt_block(["cite-sources"])
    assert "<name>cite-sources</name>" in block
    assert "use when &lt;facts&gt; &amp; quotes appear." in block
    assert f"<location>{(SKILLS / 'cite-sources' / 'SKILL.md').resolve()}</location>" in block
    assert available_skills_block([]) == ""


def _delegate(*agents: str) -> ScriptedChatModel:
    return ScriptedChatModel(
        rules=[(f"job for {a}", [f"{a} finished." + DETAIL]) for a in agents],
        responses=[
            {"tool_calls": [tool_call("task", description=f"job for {a}", subagent_type=a) for a in agents]},
            "parent done",
        ],
    )


def _system_of(model: ScriptedChatModel, agent: str) -> str:
    return next(c["system"] for c in model.calls if c["messages"][-1].text == f"job for {agent}")


def test_child_prompt_lists_exactly_its_skills_and_never_the_parents(run):
    model = _delegate("reviewer", "plain")
    agent = create_deep_agent(
        model,
        subagents=[
            {"name": "reviewer", "description": "reviews", "system_prompt": "You review.",
             "skills": ["git-diff"]},
            {"name": "plain", "description": "no skills", "system_prompt": "You help."},
        ],
        system_prompt="You lead.", settings=DelegationSettings.of(skills_dirs=[SKILLS]),
    )
    run(agent, user("go"))
    parent_system = model.calls[0]["system"]
    assert all(f"<name>{n}</name>" in parent_system for n in ("git-diff", "python-eval", "cite-sources"))

    reviewer = _system_of(model, "reviewer")
    assert reviewer.startswith("You review.\n\n")
    assert "<available_skills>" in reviewer and "<name>git-diff</name>" in reviewer
    assert "python-eval" not in reviewer and "cite-sources" not in reviewer
    assert str((SKILLS / "git-diff" / "SKILL.md").resolve()) in reviewer
    assert "You lead." not in reviewer

    plain = _system_of(model, "plain")
    assert "<available_skills>" not in plain and "git-diff" not in plain


def test_file_agent_skills_from_a_comma_list(tmp_path):
    write(tmp_path / "r.md", "---\ndescription: d\nskills: cite-sources, python-eval\n---\nYou research.\n")
    model = _delegate("r")
    create_deep_agent(model, settings=DelegationSettings.of(agents_dirs=[tmp_path], skills_dirs=[SKILLS])).invoke(user("go"))
    system = _system_of(model, "r")
    assert system.index("<name>cite-sources</name>") < system.index("<name>python-eval</name>")
    assert "git-diff" not in system


def test_unknown_skill_is_a_clear_error_at_construction():
    spec = {"name": "r", "description": "d", "skills": ["git-diff", "nope"]}
    with pytest.raises(SpecError, match=r"subagent 'r': field 'skills' names unknown skill\(s\) 'nope'; "
                                        r"available: cite-sources, git-diff, python-eval$"):
        create_deep_agent(ScriptedChatModel(), subagents=[spec], settings=DelegationSettings.of(
            skills_dirs=[SKILLS],
        ))
    with pytest.raises(SpecError, match="available: none"):
        create_deep_agent(ScriptedChatModel(), subagents=[spec])
