"""``Bash(git diff:*)``: an agent file's rule limiting which commands ``Bash`` runs, as docs/cli.md says. A command
with a shell metacharacter is refused whatever the rules say: it could run a second command.

Example::

    CommandRules.parse(["Bash(git diff:*)"]).check("git diff; touch x")  # raises ToolException naming the rules
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from langchain_core.tools import ToolException

from subagents._errors import SpecError

METACHARACTERS = frozenset(";&|`$()<>\n\r")  # what lets one command line run, chain or redirect another

_BASH_RULE = re.compile(r"^\s*Bash\s*\((.*)\)\s*$", re.DOTALL)


class CommandRules:
    """The commands a rule list allows (``rules``: the text inside each ``Bash(...)``): prefixes and exact commands."""

    def __init__(self, rules: Iterable[str]) -> None:
        self.rules = tuple(rule.strip() for rule in rules)
        for rule in self.rules:
            if not rule or (rule.endswith("*") and not rule[:-1].rstrip(": ")):
                raise SpecError(f"Bash({rule}): an empty rule limits nothing; list plain Bash for every command")
            if METACHARACTERS & set(rule):
                raise SpecError(f"Bash({rule}): a rule cannot hold a shell metacharacter")

    @classmethod
    def parse(cls, entries: Iterable[str]) -> CommandRules | None:
        """The rules of the ``Bash(...)`` entries of a ``tools`` list; ``None`` if it has none, or plain ``Bash``."""
        found = []
        for entry in entries:
            if entry.strip() == "Bash":
                return None  # plain Bash beside a rule: every command
            if (match := _BASH_RULE.match(entry)) is not None:
                found.append(match.group(1))
        return cls(found) if found else None

    def allows(self, command: str) -> bool:
        text = command.strip()
        return any(text == (prefix := rule[:-2].strip()) or (text.startswith(prefix) and text[len(prefix)].isspace())
                   if rule.endswith((":*", " *")) else " ".join(text.split()) == " ".join(rule.split())
                   for rule in self.rules)

    def check(self, command: str) -> None:
        """Raise a :class:`ToolException` naming the rules unless ``command`` is allowed."""
        shown = ", ".join(f"Bash({rule})" for rule in self.rules)
        if bad := sorted(METACHARACTERS & set(command)):
            listed = " ".join(repr(c) for c in bad)
            raise ToolException(f"command refused: it holds the shell metacharacter(s) {listed}, which this "
                                f"agent's rules ({shown}) do not allow (one command, no chaining or redirection)")
        if not self.allows(command):
            raise ToolException(f"command refused: this agent may only run commands allowed by {shown}")
