"""deepagents' own names, importable from ``deep_agent`` when the ``deepagents`` extra is installed.

A deepagents program changes only its import: ``from deepagents import
FilesystemPermission, register_harness_profile`` becomes ``from deep_agent
import ...`` and gets deepagents' objects themselves. Nothing here imports
deepagents until a name is asked for; without the extra, asking is a
:class:`MissingExtraError` (an ``ImportError``) that says what to install.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from subagents.errors import SubagentsError

EXTRA_INSTALL = 'pip install "governed-subagents[deepagents]" (from a checkout: pip install -e ".[deepagents]")'
"""What to run to get deepagents."""

FROM_DEEPAGENTS = frozenset({
    "FilesystemMiddleware", "FilesystemPermission", "FsToolName", "GeneralPurposeSubagentProfile", "HarnessProfile",
    "HarnessProfileConfig", "MemoryMiddleware", "ProviderProfile", "RubricMiddleware", "__version__", "backends",
    "register_harness_profile", "register_provider_profile",
})
"""The names of deepagents' ``__all__`` (and its ``backends``) this library does not define itself."""


class MissingExtraError(SubagentsError, ImportError):
    """An argument or name needs the ``deepagents`` extra, which is not installed.

    Under the library's one error base (``SubagentsError``) and an
    ``ImportError``, which a caller may already catch.

    Attributes:
        arguments: the arguments (or names) that asked for it.
        extra: the extra to install (``deepagents``).
    """

    def __init__(self, where: str, arguments: Sequence[str], kind: str = "argument") -> None:
        self.arguments, self.extra = tuple(arguments), "deepagents"
        names = ", ".join(repr(a) for a in arguments)
        super().__init__(f"{where}: {kind} {names} needs deepagents, which is not installed: {EXTRA_INSTALL}")


def from_deepagents(name: str) -> Any:
    """deepagents' own object for ``name`` (one of :data:`FROM_DEEPAGENTS`).

    Raises:
        AttributeError: ``name`` is not one of them.
        MissingExtraError: deepagents is not installed.
    """
    if name not in FROM_DEEPAGENTS:
        raise AttributeError(f"module 'deep_agent' has no attribute {name!r}")
    try:
        deepagents = importlib.import_module("deepagents")
    except ImportError:
        raise MissingExtraError("deep_agent", [name], kind="name") from None
    if name == "backends":
        return importlib.import_module("deepagents.backends")
    return getattr(deepagents, name)
