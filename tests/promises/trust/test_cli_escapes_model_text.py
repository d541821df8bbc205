"""Everything the CLI prints from a model is escaped: no sequence in it reaches the terminal.

A model's answer may hold a clear-screen, an OSC 52 clipboard write, an OSC 8
link with a hidden target, a one-byte C1 CSI, a bell, backspaces and a
carriage return that overwrites a line, or a bidi override. ``deep-agent
run`` prints the root's final answer, ``tasks`` and ``transcript`` read it
back, and the approval prompt shows a model's call: each shows these
characters as visible escapes (``\\x1b``) and keeps the model's newlines.
The one escape (:func:`printable`) also writes out what shows as nothing
or reorders text: RTL marks, zero-width and tag characters, line and
paragraph separators, private-use, surrogate and unassigned code points.
"""

from __future__ import annotations

import unicodedata
from types import SimpleNamespace

import pytest
from helpers.cli import SCRIPTS, cli
from helpers.scripted.trust_scripts import HOSTILE, HOSTILE_AGENT, RAW

from deep_agent.cli._approvals import describe_call
from deep_agent.cli._folder_trust import FolderCommands, describe, what_would_run
from deep_agent.cli._terminal import UNSAFE_CATEGORIES, printable


@pytest.fixture()
def project(tmp_path):
    (tmp_path / "home").mkdir()
    return tmp_path


def test_run_prints_the_roots_final_answer_escaped(project):
    run = cli("run", "go", "--thread", "t-raw", "--model", "scripted:trust_scripts:hostile_root", cwd=project,
              env=dict(SCRIPTS))
    assert run.returncode == 0, run.stderr
    leaked = [c for c in RAW if c in run.stdout]
    assert leaked == [], run.stdout
    assert "first line\n" in run.stdout
    for visible in ("\\x1b[2J", "\\x1b]52;c;ZWNobyBwd25lZA==\\x07", "\\x1b]8;;http://evil.example/", "\\x9b31m",
                    "\\x08back\\rover\\u202eflipped"):
        assert visible in run.stdout, run.stdout


def test_a_model_chosen_agent_name_is_escaped_in_the_run_and_in_tasks(project):
    run = cli("run", "go", "--thread", "t-name", "--model", "scripted:trust_scripts:hostile_agent_name",
              cwd=project, env=dict(SCRIPTS))
    assert run.returncode == 0, run.stderr
    tasks = cli("tasks", "t-name", cwd=project)
    assert tasks.returncode == 0, tasks.stderr
    for out in (run.stdout, tasks.stdout):
        assert [c for c in RAW if c in out] == [], out
    # Shown as text, escapes visible, "[bold]" not read as markup (the summary table is one line a row).
    assert printable(HOSTILE_AGENT) in run.stdout, run.stdout


def test_printable_keeps_lines_and_tabs_and_escapes_the_rest():
    shown = printable(HOSTILE, lines=True)
    assert not [c for c in RAW if c in shown]
    assert shown.startswith("first line\n") and "\tend" in shown


def test_the_approval_prompt_shows_a_models_call_escaped():
    shown = describe_call("rese\x1b[2Jarcher", "Bash", {"command": HOSTILE, "why": {"x": "\x1b]52;c;AA==\x07"}})
    assert not [c for c in RAW if c in shown]
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in shown and "rese\\x1b[2Jarcher" in shown


HIDDEN = {
    "\u200f": "\\u200f",           # RIGHT-TO-LEFT MARK (Cf)
    "\u061c": "\\u061c",           # ARABIC LETTER MARK (Cf)
    "\u200b": "\\u200b",           # ZERO WIDTH SPACE (Cf)
    "\ufeff": "\\ufeff",           # ZERO WIDTH NO-BREAK SPACE (Cf)
    "\u00ad": "\\xad",             # SOFT HYPHEN (Cf)
    "\U000e0041": "\\U000e0041",   # TAG LATIN CAPITAL LETTER A (Cf)
    "\u2028": "\\u2028",           # LINE SEPARATOR (Zl)
    "\u2029": "\\u2029",           # PARAGRAPH SEPARATOR (Zp)
    "\ue000": "\\ue000",           # private use (Co)
    "\ud800": "\\ud800",           # a lone surrogate (Cs)
    "\u0378": "\\u0378",           # unassigned (Cn)
}


@pytest.mark.parametrize("lines", [False, True])
@pytest.mark.parametrize("char", HIDDEN, ids=[f"U+{ord(c):04X}" for c in HIDDEN])
def test_format_separator_private_surrogate_and_unassigned_characters_show_as_escapes(char, lines):
    assert printable(f"rm -rf /{char}safe", lines=lines) == f"rm -rf /{HIDDEN[char]}safe"


def test_every_character_of_the_unsafe_categories_is_escaped_and_ordinary_text_is_kept():
    every = "".join(chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) in UNSAFE_CATEGORIES)
    assert printable(every).isascii()
    ordinary = "héllo wörld, 中文, עברית, 🙂 ~ \u00a0!"
    assert printable(ordinary) == ordinary


def test_the_folder_trust_question_shows_hidden_characters_as_escapes(tmp_path):
    hook = "touch ok\u200f\u2028\U000e0041 #"
    spec = SimpleNamespace(hooks={"PreToolUse": [{"hooks": [{"command": hook}]}]}, mcp_config={})
    commands = FolderCommands()
    commands[tmp_path / ".claude" / "agents" / "a.md"] = what_would_run(spec)
    shown = describe(tmp_path, commands)
    assert "touch ok\\u200f\\u2028\\U000e0041 #" in shown
    assert not [c for c in HIDDEN if c in shown]


def test_default_ignorable_letters_and_marks_show_as_escapes():
    """A Hangul filler (a letter) and a variation selector (a mark) show nothing: the reader sees them escaped."""
    from deep_agent.cli._terminal import printable

    for char in ("\u3164", "\ufe0f", "\u115f", "\u034f", "\U000e0100"):
        shown = printable(f"rm{char} -rf")
        assert char not in shown and shown.startswith("rm\\"), (hex(ord(char)), shown)
    assert printable("café 日本 ✓") == "café 日本 ✓"
