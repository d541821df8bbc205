"""``deep-agent tasks`` on a narrow terminal or a pipe never breaks a word across lines; ``--format json``."""

from __future__ import annotations

import json
import re
import time

from rich.console import Console

from deep_agent.cli._inspect import tasks_json, tasks_view
from deep_agent.cli._store import TaskRow

OUTCOME = ("The editor fixed the typo in notes.txt and rewrote the introduction so that every sentence "
           "reads plainly; nothing else changed in the repository")


def rows() -> list[TaskRow]:
    now = time.time()
    return [
        TaskRow(id="3fa2c1d0" * 4, kind="task", agent_type="editor", status="completed", started_at=now,
                duration_s=2.1, waiting_s=4.0, model_calls=3, input_tokens=900, output_tokens=120, result=OUTCOME),
        TaskRow(id="b7e1aa20" * 4, kind="background", agent_type="surveyor", status="waiting_for_approval",
                runner="local", attempt=2, started_at=now, duration_s=1.0, error="waiting for a person"),
    ]


def render(width: int, **kwargs) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(tasks_view("thread-1", rows(), **kwargs, width=width))
    return console.export_text()


def words(text: str) -> set[str]:
    return set(re.split(r"[\s│┃┏┓┗┛━─┡┩╇┳┻╋┣┫└┘┌┐├┤┼┬┴]+", text))


def test_at_80_columns_no_word_is_split_across_lines():
    text = render(80, full=True)
    shown = words(text)
    for word in [*OUTCOME.split(), "completed", "waiting_for_approval", "background", "editor",
                 "surveyor", "waiting", "3fa2c1d0"]:
        assert word in shown, (word, text)
    assert "2.1s + 4.0s waiting" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_a_wide_terminal_keeps_the_table():
    text = render(200)
    assert "┃ task " in text and "result or error" in text and "2.1s + 4.0s waiting" in text


def test_json_is_one_document_with_every_field_and_whole_texts():
    data = json.loads(tasks_json("thread-1", rows()))
    assert data["thread"] == "thread-1"
    first, second = data["tasks"]
    assert first["id"] == "3fa2c1d0" * 4 and first["result"] == OUTCOME and first["status"] == "completed"
    assert first["duration_s"] == 2.1 and first["waiting_s"] == 4.0 and first["tokens"] == 1020
    assert second["kind"] == "background" and second["runner"] == "local" and second["attempt"] == 2
    assert "paused_since" not in first


def test_a_table_that_would_not_fit_becomes_blocks_at_any_width():
    for width in (100, 110, 125):
        text = render(width)
        assert max(len(line.rstrip()) for line in text.splitlines()) <= width, (width, text)
        assert "waiting_for_approval" in words(text) and "background" in words(text)
