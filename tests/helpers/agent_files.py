"""Agent files written for a test: a file at a path, the markdown of one agent, the fixture folders."""

from __future__ import annotations

from pathlib import Path

from helpers import FIXTURES as _FIXTURES

FIXTURES = _FIXTURES / "agents"
GOOD, BAD = FIXTURES / "good", FIXTURES / "bad"
SKILLS = _FIXTURES / "skills"
DETAIL = " Details: " + "every step was checked and recorded. " * 6  # past the short-answer nudge


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def agent_md(name: str, description: str = "does things", extra: str = "", body: str = "Work.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}\n"


# (file, field as the file spells it or None, what the message must say)
BAD_CASES = [
    ("no-frontmatter", None, "has no frontmatter; expected the first line to be '---'"),
    ("unterminated", None, "unterminated frontmatter; expected a closing '---' line"),
    ("yaml-syntax", None, "frontmatter line 3: invalid YAML"),
    ("python-tag", None, "the tag '!!python/object/apply:os.system' is not allowed"),
    ("frontmatter-list", None, "frontmatter must be a mapping of fields, got a list"),
    ("key-not-string", None, "frontmatter keys must be strings, got 1"),
    ("empty-file", None, "is empty; expected a '---' line"),
    ("duplicate-key", "model", "given twice (frontmatter line 4)"),
    ("missing-description", "description", "required; expected a non-empty string"),
    ("blank-description", "description", "description must not be empty"),
    ("description-list", "description", "expected a string, got ['reviews', 'code']"),
    ("invalid-name", "name", "name must be letters, digits, '-', '_' and single inner dots, at most 128 characters (got 'code reviewer')"),
    ("name-number", "name", "expected a string, got 42"),
    ("empty-body", None, "has an empty body; expected the agent's system prompt"),
    ("tools-mapping", "tools", "expected a list or a comma-separated string of names, got {'Read': True}"),
    ("tools-empty", "tools", "is empty; expected a list or comma-separated names"),
    ("tools-item", "tools", "expected every item to be a non-empty name, got 3"),
    ("disallowed-twice", "disallowedTools", "given twice, also as 'disallowed_tools'"),
    ("model-number", "model", "expected 'inherit', 'provider:model' or a profile name (a string), got 4"),
    ("model-malformed", "model", "got 'openai:'"),
    ("max-turns-zero", "maxTurns", "expected a positive integer (model calls), got 0"),
    ("max-turns-text", "max_turns", "expected a positive integer (model calls), got 'ten'"),
    ("max-turns-bool", "max_iteration_per_run", "expected a positive integer (model calls), got True"),
    ("budget-negative", "max_budget_per_run", "expected a positive number (US dollars), got -1.5"),
    ("timeout-zero", "timeout_s", "expected a positive number of seconds, got 0"),
    ("permission-unknown", "permissionMode", "expected one of always_confirm, confirm_risky, never_confirm"),
    ("mcp-not-mapping", "mcp_config", "expected a mapping of MCP server names to configs, got 3"),
    ("mcp-no-command", "mcp_config", "MCP server 'files': expected exactly one of 'command' (local) or 'url'"),
    ("mcp-twice", "mcpServers", "given twice, also as 'mcp_config'"),
    ("condenser-word", "condenser", "expected 'none'/false (off), 'default'/true, or a mapping"),
    ("condenser-key", "condenser", "unknown condenser setting(s) max_size"),
    ("condenser-trigger", "condenser", "condenser trigger: expected [tokens, N]"),
    ("hooks-list", "hooks", "expected a mapping of hook event names"),
    ("skills-number", "skills", "expected a list or a comma-separated string of names, got 5"),
    ("skills-bad-name", "skills", "(got 'git diff')"),
    ("color-number", "color", "expected a string, got 3"),
    ("metadata-list", "metadata", "expected a mapping, got [1, 2]"),
]
