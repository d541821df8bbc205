"""deepagents' own names, importable from ``deep_agent`` when the ``deepagents`` extra is installed (imported
when a name is asked for; without the extra, a :class:`MissingExtraError` that says what to install)."""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain.agents import AgentState
from langchain.agents.middleware import AgentMiddleware, ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from subagents._errors import SubagentsError
from subagents._roles import ChildPolicy

EXTRA_INSTALL = 'pip install "governed-subagents[deepagents]" (from a checkout: pip install -e ".[deepagents]")'

FROM_DEEPAGENTS = frozenset({
    "FilesystemMiddleware", "FilesystemPermission", "FsToolName", "GeneralPurposeSubagentProfile", "HarnessProfile",
    "HarnessProfileConfig", "MemoryMiddleware", "ProviderProfile", "RubricMiddleware", "__version__", "backends",
    "register_harness_profile", "register_provider_profile",
})
"""The names of deepagents' ``__all__`` (and its ``backends``) this library does not define itself."""


class MissingExtraError(SubagentsError, ImportError):
    """An argument or name needs the ``deepagents`` extra, which is not installed (also an ``ImportError``):
    ``arguments`` holds the arguments (or names) that asked for it, ``extra`` the extra to install."""

    def __init__(self, where: str, arguments: Sequence[str], kind: str = "argument") -> None:
        self.arguments, self.extra = tuple(arguments), "deepagents"
        names = ", ".join(repr(a) for a in arguments)
        super().__init__(f"{where}: {kind} {names} needs deepagents, which is not installed: {EXTRA_INSTALL}")


def from_deepagents(name: str) -> Any:
    """deepagents' own object for ``name`` (one of :data:`FROM_DEEPAGENTS`), or ``AttributeError``."""
    if name not in FROM_DEEPAGENTS:
        raise AttributeError(f"module 'deep_agent' has no attribute {name!r}")
    try:
        deepagents = importlib.import_module("deepagents")
    except ImportError:
        raise MissingExtraError("deep_agent", [name], kind="name") from None
    return importlib.import_module("deepagents.backends") if name == "backends" else getattr(deepagents, name)


# Without deepagents' stack a model used to its prompts still calls its tools; LangChain hands such a call
# to each wrap_tool_call with request.tool None, and DeepagentsToolHint adds where the tool comes from.
FILE_TOOLS = ("ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep")


def missing_tool_hints(*, left_out: bool = False) -> dict[str, str]:
    """Tool name -> where it comes from and how to get it (``left_out``: ``deepagents_stack=False``)."""
    why = ("deepagents_stack=False in create_deep_agent's settings leaves its stack out" if left_out
           else f"deepagents is not installed: {EXTRA_INSTALL}")
    hints = {name: f"{name} is one of deepagents' file tools, which come with its stack: {why}. "
                   f"Or pass a tool named {name!r} in tools=." for name in FILE_TOOLS}
    hints["execute"] = ("execute is deepagents' shell tool, which comes with its stack over a backend that runs "
                        f"commands (backend= a sandbox): {why}. Or pass a tool named 'execute' in tools=.")
    hints["write_todos"] = ("write_todos is LangChain's TodoListMiddleware, which deepagents too adds only when "
                            "asked: pass middleware=[TodoListMiddleware()] (from langchain.agents.middleware).")
    return hints


class DeepagentsToolHint(AgentMiddleware[AgentState[Any], Any, Any]):
    """LangChain's error result for a call to a deepagents tool the agent lacks, with where the tool comes from
    (``hints``: tool name -> the sentence added); calls to tools the agent has, and other unknown names, pass."""

    child_policy = ChildPolicy(inherited="every")  # every child gets it too, whatever its model

    def __init__(self, hints: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.hints = dict(missing_tool_hints() if hints is None else hints)

    def _explained(self, request: ToolCallRequest, result: ToolMessage | Command[Any]) -> ToolMessage | Command[Any]:
        hint = self.hints.get(request.tool_call["name"]) if request.tool is None else None
        if hint is None or not isinstance(result, ToolMessage) or result.status != "error":
            return result
        return result.model_copy(update={"content": f"{result.text} {hint}"})

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        return self._explained(request, handler(request))

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        return self._explained(request, await handler(request))
