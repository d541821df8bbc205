"""Package re-exports loaded on first use (PEP 562): ``import deep_agent`` (and the CLI's ``--help``) loads
neither LangChain nor the background runtime, MCP or hooks until an agent asks for them.

An exported error or warning reports the package that exports it as its module (:func:`publish`): a traceback names
``subagents.SpecError``, and pickle finds it there. Errors only: a TypedDict or a pydantic model resolves its string
annotations in the module its ``__module__`` names."""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

_EXPORTED: dict[str, dict[str, str]] = {}  # private module -> name -> the package exporting it (the first one)


def publish(error: type[BaseException]) -> None:
    """Name the package exporting ``error`` as its module, if one does (a traceback's name, pickle's path)."""
    package = _EXPORTED.get(error.__module__, {}).get(error.__qualname__)
    if package is not None:
        error.__module__ = package
        setattr(sys.modules[package], error.__qualname__, error)  # in the package's dict (pickle, the boundary)


def lazy_exports(package: str, where: Mapping[str, str] | None = None) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: each name in ``where`` imported from its module once. Without
    ``where``, the names are those its ``__init__.py`` re-exports under ``if TYPE_CHECKING:`` (``from m import X as
    X``), listed once for type checkers and for this, and they are set as its ``__all__``."""
    module = sys.modules[package]
    if where is None:
        tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
        where = {alias.name: str(node.module) for block in tree.body if isinstance(block, ast.If)
                 and ast.unparse(block.test) == "TYPE_CHECKING" for node in block.body
                 if isinstance(node, ast.ImportFrom) for alias in node.names}
        setattr(module, "__all__", sorted(where))  # noqa: B010 - a module attribute mypy does not know
    for name, source in where.items():
        _EXPORTED.setdefault(source, {}).setdefault(name, package)
        error = vars(sys.modules[source]).get(name) if source in sys.modules else None  # made before, not loaded now
        if isinstance(error, type) and issubclass(error, BaseException):
            publish(error)

    def __getattr__(name: str) -> Any:
        source = where.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        setattr(module, name, value)  # looked up once
        return value

    return __getattr__
