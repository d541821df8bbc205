"""Which child one call runs, on which graph, from which input: the delegation modes in one place.

The runner asks :func:`set_up_child` for a call's spec, graph and initial
state. By default that is the registry's spec and cached graph, and the
isolated input (one ``HumanMessage``). Three modes, each off unless asked
for, change one part each and keep every other rule:

* a **dynamic subagent** (a name defined at run time with
  ``create_subagent``, see :mod:`subagents._dynamic`) is resolved from the
  parent's state, re-checked, and built once per definition;
* a **per-call output schema** (see :mod:`subagents._call_schema`) builds
  the spec with that response format, once per schema;
* a **fork** (``context="fork"``, see :mod:`subagents._fork`) starts the
  child from the parent's conversation.

What a mode adds to the task record comes back as ``record_extra``.

Example::

    setup = set_up_child(registry, call, blocked_keys)
    setup.graph.invoke(setup.inputs, config)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage

from subagents._builder import build_subagent
from subagents._call_schema import OutputSchemaError, call_format, requested_format
from subagents._dynamic import DYNAMIC_SUBAGENTS_KEY, check_definition, definition_key, spec_from_definition
from subagents._fork import forked_input
from subagents._graph_cache import graphs_for
from subagents._isolation import child_input
from subagents._one_level import is_forbidden_tool, tool_name
from subagents._outcome import TaskCall
from subagents._registry import SubagentRegistry, UnknownSubagent
from subagents._spec import AnySpec, CompiledSubagent, SubagentSpec


@dataclasses.dataclass
class ChildSetup:
    """What one delegation runs."""

    spec: AnySpec
    graph: Any
    inputs: dict[str, Any]
    record_extra: dict[str, Any]


def set_up_child(registry: SubagentRegistry, call: TaskCall, blocked: frozenset[str]) -> ChildSetup:
    """The spec, graph and input for ``call``; raises with a readable reason if it cannot run.

    A stand-in registry (background sessions hand out their own graph) gets
    declared specs and forks only: dynamic subagents and per-call formats
    belong to the ``task`` path.
    """
    modes = isinstance(registry, SubagentRegistry)
    spec, spec_key, extra = _spec_for(registry, call, modes)
    requested = requested_format(call.output_schema, call.parent_config) if modes else None
    if requested is not None:
        graph = _graph_with_format(registry, call, spec, spec_key, requested, extra)
    elif spec_key[0] == "dynamic" and isinstance(spec, SubagentSpec):  # run-time definitions are specs
        graph = graphs_for(registry).get(spec_key, lambda: _build(registry, call, spec))
    else:
        graph = registry.graph(call.subagent_type, parent_model=call.parent_model,
                               parent_tools=call.parent_tools)
    if getattr(spec, "context", "isolated") == "fork":
        inputs, inherited = forked_input(call.parent_state, call.description, blocked, call.tool_call_id)
        extra.update(context="fork", inherited_tokens=inherited)
    else:
        inputs = child_input(call.parent_state, call.description, blocked)
    return ChildSetup(spec, graph, inputs, extra)


def _spec_for(
    registry: SubagentRegistry, call: TaskCall, modes: bool
) -> tuple[AnySpec, tuple[str, str], dict[str, Any]]:
    name = call.subagent_type
    try:
        return registry.spec(name), ("spec", name), {}
    except UnknownSubagent:
        if not modes:
            raise
    definitions = call.parent_state.get(DYNAMIC_SUBAGENTS_KEY) or {}
    definition = definitions.get(name) if isinstance(definitions, Mapping) else None
    if not isinstance(definition, Mapping):
        raise _unknown(registry, name, definitions, call.parent_state)
    # Checked again at use: a definition may have reached the state without create_subagent.
    fields = {k: v for k, v in definition.items() if k in ("name", "description", "system_prompt",
                                                           "tools", "max_turns")}
    checked = check_definition(fields, declared=registry.names, existing={},
                               parent_tools=inheritable_tool_names(call.parent_tools), cap=1)
    if checked.name != name:
        raise UnknownSubagent(f"created subagent {name!r} is stored under another name ({checked.name!r})")
    return spec_from_definition(checked), ("dynamic", definition_key(fields)), {"dynamic": True}


def inheritable_tool_names(tools: Any) -> list[str]:
    """Names of the parent's tools a child may be given."""
    return [tool_name(t) for t in tools or () if not is_forbidden_tool(t)]


def _unknown(registry: SubagentRegistry, name: str, definitions: Any, state: Mapping[str, Any]) -> UnknownSubagent:
    created = list(definitions) if isinstance(definitions, Mapping) else []
    valid = ", ".join([*registry.names, *created]) or "none"
    message = f"unknown subagent_type {name!r}; valid types are: {valid}"
    if _being_created(name, state):
        message += (
            f". {name!r} is being created by a create_subagent call in this same turn; "
            "delegate to it with task from your next turn"
        )
    return UnknownSubagent(message)


def _being_created(name: str, state: Mapping[str, Any]) -> bool:
    messages = state.get("messages") or ()
    last = messages[-1] if messages else None
    if not isinstance(last, AIMessage):
        return False
    return any(c.get("name") == "create_subagent" and (c.get("args") or {}).get("name") == name
               for c in last.tool_calls)


def _graph_with_format(
    registry: SubagentRegistry, call: TaskCall, spec: AnySpec, spec_key: tuple[str, str],
    requested: Any, extra: dict[str, Any],
) -> Any:
    if isinstance(spec, CompiledSubagent):
        raise OutputSchemaError(
            f"a per-call output schema cannot be used with compiled subagent {spec.name!r}: its graph "
            "is fixed when it is compiled. Give the graph its own response_format, or declare the "
            "subagent as a spec"
        )
    fmt = call_format(requested)
    extra["output_schema"] = fmt.label
    shaped = spec.model_copy(update={"response_format": fmt.response_format,
                                     "middleware": (*spec.middleware, *fmt.middleware)})
    return graphs_for(registry).get((spec_key, fmt.key), lambda: _build(registry, call, shaped))


def _build(registry: SubagentRegistry, call: TaskCall, spec: SubagentSpec) -> Any:
    return build_subagent(spec, parent_model=call.parent_model, parent_tools=call.parent_tools,
                          unknown_tools=registry.unknown_tools, options=registry.options)
