"""Assembling a root agent that delegates to governed subagents."""

from deep_agent.factory import create_deep_agent, resolve_root_model

__all__ = ["create_deep_agent", "resolve_root_model"]
