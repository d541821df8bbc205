"""The example deep agent that ``langgraph.json`` exposes to LangGraph Studio.

``langgraph dev`` serves it with its own checkpointer. It runs on
``OPENAI_API_KEY`` (and ``OPENAI_BASE_URL``/``OPENAI_MODEL``) when set, and
otherwise on the scripted demo model, so it works offline.
"""

from __future__ import annotations

from typing import Any

from deep_agent.demo import build_demo_agent, demo_model
from deep_agent.model_choice import NoModelConfigured, choose_model


def studio_model() -> Any:
    try:
        return choose_model(None)
    except NoModelConfigured:
        return demo_model()


graph = build_demo_agent(studio_model())
