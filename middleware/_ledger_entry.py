"""What one delegation leaves in the ledger: a compact record of fixed size.

Every checkpoint carries the whole ledger ``subagent_tasks``, so a record
that repeated the task description and the child's full answer (both
already in the parent's messages) would make each delegation cost more to
checkpoint than the one before it. The ledger keeps previews instead:

* ``description`` and ``result`` -- at most :data:`PREVIEW_CHARS` characters
  (a clipped text ends with ``…``), with ``description_chars`` and
  ``result_chars`` giving the full lengths;
* ``error`` -- at most :data:`ERROR_PREVIEW_CHARS` characters, with
  ``error_chars`` (``None`` for a text that is absent).

The full texts stay where they already are: the description in the
``task`` call of the parent's AI message, the answer (or
``Subagent '<name>' failed: <error>``) in the ToolMessage with the same
``tool_call_id``, and every child message in the transcript
(``record["transcript"]``, see :func:`subagents.get_transcript`).

Example::

    entry = ledger_entry({"id": "t1", "description": "Find X", "result": "A" * 5000, ...})
    entry["result"][-1], len(entry["result"]), entry["result_chars"]   # ('…', 200, 5000)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PREVIEW_CHARS = 200
"""Longest ``description`` and ``result`` a ledger record keeps."""

ERROR_PREVIEW_CHARS = 1000
"""Longest ``error`` a ledger record keeps (errors are rarer and worth more words)."""

ELLIPSIS = "…"


def clip(text: str, limit: int) -> str:
    """``text`` when it fits in ``limit`` characters, else its start and ``…`` (``limit`` in all)."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + ELLIPSIS


def ledger_entry(record: Mapping[str, Any]) -> dict[str, Any]:
    """The compact record the ledger keeps for one delegation's full record.

    Every field is kept except the long texts, which become previews with
    their full lengths; a record already compact comes back unchanged.
    """
    entry = dict(record)
    for key, limit in (("description", PREVIEW_CHARS), ("result", PREVIEW_CHARS), ("error", ERROR_PREVIEW_CHARS)):
        text, length_key = entry.get(key), f"{key}_chars"
        if not isinstance(text, str):
            entry.setdefault(length_key, None)
        elif not (isinstance(entry.get(length_key), int) and len(text) <= limit):
            entry[length_key] = len(text)  # a record already compact keeps the full length it recorded
            entry[key] = clip(text, limit)
    return entry

