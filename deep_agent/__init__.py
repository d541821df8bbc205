"""Assembling a root agent that delegates to governed subagents."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deep_agent.factory import create_deep_agent, resolve_root_model

__all__ = ["create_deep_agent", "resolve_root_model"]


def __getattr__(name: str) -> Any:
    # Imported on first use, so `deep-agent --help` does not load LangChain.
    if name in __all__:
        from deep_agent import factory

        return getattr(factory, name)
    raise AttributeError(f"module 'deep_agent' has no attribute {name!r}")
