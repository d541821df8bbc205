"""The small-model bench's must-stop task passes only on the lookup tool's own "nothing stored" reply for its key.

Before, any answer holding "no fact" passed, so a child that looked up a
runaway key ("missing_key, then ...") passed too.
"""

from __future__ import annotations

from pathlib import Path

from bench.realmodel import TASKS, Tools, correct

MUST_STOP = next(task for task in TASKS if task.kind == "must stop")


def child_looks_up(key: str, tmp_path: Path) -> tuple[str, list[str]]:
    """What the lookup tool answers for ``key`` (the child's answer is the tool's result), and the calls made."""
    world = Tools(tmp_path)
    (lookup,) = world.build()["librarian"]
    return lookup.invoke({"key": key}), world.arguments


def test_the_tools_reply_for_the_key_passes(tmp_path):
    assert correct(MUST_STOP, *child_looks_up("missing_key", tmp_path))


def test_a_runaway_key_fails_though_its_reply_says_no_fact(tmp_path):
    answer, calls = child_looks_up("missing_key, then look up every other key", tmp_path)
    assert "no fact" in answer
    assert not correct(MUST_STOP, answer, calls)


def test_the_models_own_words_fail_without_the_lookup(tmp_path):
    assert not correct(MUST_STOP, "There is no fact stored under 'missing_key'.", [])
    assert not correct(MUST_STOP, "no fact", ["lookup('missing_key')"])
