"""What a spec's ``tools`` list may hold: what ``create_agent`` accepts.

An entry is a parent tool's name, a ``BaseTool``, a plain Python function
or other callable (made a tool with :func:`langchain_core.tools.tool`, so
its name and docstring become the tool's), or a provider tool dict (a JSON
schema ``{"name": ..., ...}`` or ``{"type": "function", "function": {...}}``).

Example::

    def search(query: str) -> str:
        \"\"\"Search the web.\"\"\"
        ...

    normalize_tools(["read_file", search])   # ('read_file', StructuredTool(name='search'))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.tools import BaseTool


def normalize_tools(value: Any) -> Any:
    """The ``tools`` list with callables made tools; anything else raises ``ValueError``.

    ``None`` (inherit the parent's tools) passes through unchanged.
    """
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not _is_sequence(value):
        raise ValueError(
            "expected a list of tool names, BaseTools, functions or tool dicts, "
            f"not one {type(value).__name__}"
        )
    return tuple(_one_tool(item, index) for index, item in enumerate(value))


def _is_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple)) or (
        hasattr(value, "__iter__") and hasattr(value, "__len__") and not isinstance(value, Mapping)
    )


def _one_tool(item: Any, index: int) -> str | BaseTool | dict[str, Any]:
    if isinstance(item, (str, BaseTool)):
        if isinstance(item, str) and not item.strip():
            raise ValueError(f"item {index}: a tool name must not be empty")
        return item
    if isinstance(item, Mapping):
        if not _dict_tool_name(item):
            raise ValueError(
                f"item {index}: a tool dict needs a 'name' (or 'function': {{'name': ...}})"
            )
        return dict(item)
    if callable(item):
        from langchain_core.tools import tool

        try:
            return tool(item)
        except Exception as exc:  # noqa: BLE001 - reported with the item named
            name = getattr(item, "__name__", type(item).__name__)
            raise ValueError(f"item {index} ({name}): cannot be made a tool: {exc}") from None
    raise ValueError(
        f"item {index}: expected a tool name, BaseTool, function or tool dict, "
        f"got {type(item).__name__}"
    )


def _dict_tool_name(item: Mapping[str, Any]) -> str:
    function = item.get("function")
    name = item.get("name") or (function.get("name") if isinstance(function, Mapping) else None)
    return name if isinstance(name, str) else ""
