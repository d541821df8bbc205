"""Package re-exports loaded on first use (PEP 562): ``import deep_agent`` (and the CLI's ``--help``) loads
neither LangChain nor the background runtime, MCP or hooks until an agent asks for them."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: each name in ``where`` imported from its module once."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # looked up once
        return value

    return __getattr__
