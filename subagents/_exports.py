"""Package re-exports loaded on first use (PEP 562): ``import deep_agent`` (and the CLI's ``--help``) loads
neither LangChain nor the background runtime, MCP or hooks until an agent asks for them.

An exported error or warning reports the package that exports it as its module, from the moment its private module
is loaded: a traceback names ``subagents.SpecError``, and pickle finds it there. Only exceptions: a TypedDict or a
pydantic model resolves its string annotations in the module its ``__module__`` names."""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path
from types import ModuleType
from typing import Any

_EXPORTED: dict[str, dict[str, str]] = {}  # private module -> name -> the package exporting it (the first one)


def _publish(module: ModuleType) -> None:
    for name, package in _EXPORTED.get(module.__name__, {}).items():
        value = module.__dict__.get(name)
        if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == module.__name__:
            value.__module__ = package
            setattr(sys.modules[package], name, value)  # found in the package's dict (pickle, the boundary's check)


class _Publisher(MetaPathFinder):
    """Publishes a private module's exported errors once it has run."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        spec = PathFinder.find_spec(name, path, target) if name in _EXPORTED else None
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module

            def exec_module(module: ModuleType) -> None:
                run(module)
                _publish(module)

            spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


sys.meta_path.insert(0, _Publisher())


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
    for source in set(where.values()) & set(sys.modules):  # loaded before this package was
        _publish(sys.modules[source])

    def __getattr__(name: str) -> Any:
        source = where.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        setattr(module, name, value)  # looked up once
        return value

    return __getattr__
