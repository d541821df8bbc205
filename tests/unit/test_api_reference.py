"""The API reference documents exactly the public surface: every package's ``__all__``, nothing else.

A package's ``__all__`` is its whole public surface (docs/layout.md); a module
that is not re-exported is internal. So the reference has one page per
package, ``docs/reference/<package>.md``, whose ``::: <package>.<name>``
entries are that package's ``__all__`` in order: a name added to ``__all__``
without a page entry, or a page entry for a module or name outside it, fails
here. (``tests/integration/docs/`` builds the pages.)
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"
ENTRY = re.compile(r"^::: (\S+)", re.MULTILINE)


def public_packages() -> list[str]:
    found = []
    for top in ("subagents", "middleware", "deep_agent"):
        for init in (ROOT / top).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT).parts
            if not any(part.startswith("_") for part in parts):
                found.append(".".join(parts))
    return sorted(found)


def test_every_name_in_every_packages_all_resolves() -> None:
    unresolved = []
    for package in public_packages():
        module = importlib.import_module(package)
        unresolved += [f"{package}.{name}" for name in module.__all__ if not hasattr(module, name)]
    assert not unresolved, unresolved


def test_each_reference_page_lists_exactly_its_packages_all() -> None:
    packages = public_packages()
    assert {page.stem for page in REFERENCE.glob("*.md")} == set(packages), "one reference page per public package"
    for package in packages:
        listed = ENTRY.findall((REFERENCE / f"{package}.md").read_text())
        expected = [f"{package}.{name}" for name in importlib.import_module(package).__all__]
        assert listed == expected, f"docs/reference/{package}.md: {sorted(set(listed) ^ set(expected))}"


def test_the_site_navigation_holds_every_reference_page() -> None:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    reference = next(item["API reference"] for item in nav if isinstance(item, dict) and "API reference" in item)
    pages = sorted(page for item in reference for page in item.values())
    assert pages == sorted(f"reference/{package}.md" for package in public_packages())
