"""State and middleware shared by the fault-isolation and write-back promises."""

from __future__ import annotations

import operator
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import AgentState

from helpers.graphs import user


class SharedState(AgentState):
    notes: NotRequired[str]
    findings: NotRequired[Annotated[list, operator.add]]


def start(**state: Any) -> dict[str, Any]:
    return {**user("go"), **state}
