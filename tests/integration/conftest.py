"""Everything under ``integration/`` starts a real server or process: marked ``integration``, and by its folder.

``integration/server`` -> ``server``; ``postgres`` -> ``server`` and
``postgres``; ``realmodel`` -> ``server`` and ``realmodel``; ``mcp`` ->
``server`` and ``mcp``; ``cli`` -> ``cli``; ``bench`` -> ``bench``;
``notebooks`` -> ``notebooks``; ``docs`` -> ``docs``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent
MARKERS = {
    "server": ("server",),
    "postgres": ("server", "postgres"),
    "realmodel": ("server", "realmodel"),
    "mcp": ("server", "mcp"),
    "cli": ("cli",),
    "bench": ("bench",),
    "notebooks": ("notebooks",),
    "docs": ("docs",),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        try:
            folder = item.path.relative_to(HERE).parts[0]
        except ValueError:  # not under integration/
            continue
        item.add_marker("integration")
        for marker in MARKERS.get(folder, ()):
            item.add_marker(marker)
