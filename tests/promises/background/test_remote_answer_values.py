"""A finished remote run's answer is read from any values a server sends: the task settles, never a loop of notes.

An answer that could not be read raised in the poll, which only noted
"could not report this task", every poll, and the task never settled.
"""

from __future__ import annotations

import json

import pytest

from subagents.background._remote import fields_from

RUN = {"run_id": "r1", "status": "success"}


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("values, expected", [
    ({"messages": 5}, ""),  # not reversible
    ({"messages": [{"type": "ai", "content": [{"type": "text", "text": {"x": 1}}, "ok"]}]}, "ok"),  # join of a dict
    ({"structured_response": nested(1000)}, "(an answer that cannot be shown as JSON: RecursionError)"),
    (nested(1000), "(an answer that cannot be shown as JSON: RecursionError)"),
    ({"messages": [{"type": "ai", "content": [nested(1000)]}]},
     "(an answer that cannot be shown as JSON: RecursionError)"),  # repr of a deep block
])
def test_a_finished_run_settles_whatever_its_values(values, expected) -> None:
    fields = fields_from(RUN, {"values": values})
    assert fields["status"] == "completed" and fields["result"] == expected


def test_ordinary_answers_read_as_before() -> None:
    assert fields_from(RUN, {"values": {"structured_response": {"a": 1}}})["result"] == json.dumps({"a": 1})
    assert fields_from(RUN, {"values": {"structured_response": "text"}})["result"] == '"text"'
    assert fields_from(RUN, {"values": "plain"})["result"] == "plain"
    content = [{"type": "text", "text": "a"}, {"type": "image"}, "b", [1]]
    assert fields_from(RUN, {"values": {"messages": [{"type": "ai", "content": content}]}})["result"] == "ab[1]"
