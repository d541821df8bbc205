"""Name -> subagent: every spec validated at once, each child graph compiled on first delegation, at most once."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from subagents._builder import BuildOptions, build_subagent, check_spec
from subagents._errors import DynamicSubagentError, SpecError, UnknownSubagent, UnsupportedCall
from subagents._spec import AnySpec, CompiledSubagent, SubagentSpec, coerce_specs, ready_runnable


class GraphCache:
    """A thread-safe LRU cache of graphs built per call: distinct schemas cannot grow memory without bound."""

    def __init__(self, max_graphs: int = 32) -> None:
        if max_graphs < 1:
            raise SpecError(f"max_graphs must be >= 1 (got {max_graphs})")
        self.max_graphs = max_graphs
        self._graphs: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._graphs)

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The graph for ``key``, built with ``build`` on first use."""
        with self._lock:
            if key in self._graphs:
                self._graphs.move_to_end(key)
                return self._graphs[key]
            graph = self._graphs[key] = build()
            while len(self._graphs) > self.max_graphs:
                self._graphs.popitem(last=False)
            return graph


# -- Dynamic subagents: definitions a parent makes at run time, kept as JSON-ready dicts in its state (so a
# resumed thread still has them), checked by :func:`check_definition` when made and again whenever used.

DYNAMIC_SUBAGENTS_KEY = "dynamic_subagents"  # the parent state key of run-time definitions

# Below the key on purpose: modules these import read DYNAMIC_SUBAGENTS_KEY while this one loads.
from subagents._boundary import FORBIDDEN_TOOL_NAMES  # noqa: E402
from subagents._spec import DEFAULT_MAX_TURNS, NAME_PATTERN  # noqa: E402

MAX_NAME_CHARS = 64


class DynamicDefinition(BaseModel):
    """What ``create_subagent`` accepts (and what is kept in state, plus provenance)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    system_prompt: str
    tools: list[str] | None = None
    max_turns: int | None = Field(default=None, strict=True)


def merge_definitions(left: dict[str, dict[str, Any]] | None, right: dict[str, dict[str, Any]] | None
                     ) -> dict[str, dict[str, Any]]:
    """Reducer: new names are added; an existing definition is never replaced."""
    if not left:
        return dict(right or {})
    return left if not right else {**right, **left}


def check_definition(request: Mapping[str, Any], *, declared: Collection[str], existing: Mapping[str, Any],
                     parent_tools: Collection[str], cap: int) -> DynamicDefinition:
    """The definition ``request`` describes, or :class:`DynamicSubagentError` saying which rule it breaks: a new
    slug name under ``cap``, ``tools`` only narrowing the parent's, ``max_turns`` only tightening, bounded texts."""
    try:
        definition = DynamicDefinition.model_validate(dict(request))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "arguments"
        raise DynamicSubagentError(f"{field}: {first['msg']}") from None
    name = definition.name
    if not NAME_PATTERN.fullmatch(name) or len(name) > MAX_NAME_CHARS:
        raise DynamicSubagentError(f"name: must be a slug of letters, digits, '-' and '_' (at most {MAX_NAME_CHARS}), "
                                   f"got {name[:80]!r}")
    if name in declared:
        raise DynamicSubagentError(f"name: {name!r} is a declared subagent and cannot be shadowed; choose another name")
    if name in existing:
        raise DynamicSubagentError(f"name: a subagent named {name!r} was already created; delegate to it, "
                                   "or choose another name")
    if len(existing) >= cap:
        raise DynamicSubagentError(f"the limit of {cap} created subagents is reached ({', '.join(sorted(existing))}); "
                                   "delegate to one of them instead")
    _check_text("description", definition.description, 1_000)
    _check_text("system_prompt", definition.system_prompt, 20_000)
    for tool in definition.tools or ():
        if tool in FORBIDDEN_TOOL_NAMES:
            raise DynamicSubagentError(f"tools: {tool!r} is a delegation, todo or memory tool; a subagent never "
                                       "holds one")
        if tool not in parent_tools:
            available = ", ".join(sorted(parent_tools)) or "none"
            raise DynamicSubagentError(f"tools: {tool[:80]!r} is not one of your tools, and a subagent's tools can "
                                       f"only narrow yours (available: {available})")
    if definition.max_turns is not None and not 1 <= definition.max_turns <= DEFAULT_MAX_TURNS:
        raise DynamicSubagentError(f"max_turns: can only tighten the default limit: between 1 and {DEFAULT_MAX_TURNS}, "
                                   f"got {definition.max_turns}")
    return definition


def _check_text(field: str, value: str, limit: int) -> None:
    if not value.strip():
        raise DynamicSubagentError(f"{field}: must not be empty")
    if len(value) > limit:
        raise DynamicSubagentError(f"{field}: {len(value)} characters; at most {limit} are accepted")


def spec_from_definition(definition: DynamicDefinition) -> SubagentSpec:
    """The :class:`SubagentSpec` a checked definition builds into."""
    return SubagentSpec(name=definition.name, description=definition.description,
                        system_prompt=definition.system_prompt, max_turns=definition.max_turns,
                        tools=None if definition.tools is None else tuple(definition.tools), metadata={"dynamic": True})


def definition_key(definition: Mapping[str, Any]) -> str:
    """A hash of what a definition builds (not when or by which call it was made)."""
    fields = {k: definition.get(k) for k in DynamicDefinition.model_fields}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()


def takes_parent_tools(spec: AnySpec) -> bool:
    """Whether a spec's tools come from the parent's: all of them (``tools`` omitted) or some by name."""
    return isinstance(spec, SubagentSpec) and (spec.tools is None or any(isinstance(t, str) for t in spec.tools))


class SubagentRegistry:
    """Validated specs by name, and the compiled graphs built from them so far."""

    def __init__(self, specs: Sequence[AnySpec | Mapping[str, Any]], *, options: BuildOptions | None = None,
                 inherited_middleware: Sequence[AgentMiddleware] = ()) -> None:
        self._specs: dict[str, AnySpec] = {s.name: s for s in coerce_specs(specs)}
        self._graphs: dict[str, Any] = {}
        # A caller's runnable is stamped with its name now, as deepagents does (a config copy, never a build).
        self._ready: dict[str, Any] = {s.name: ready_runnable(s.name, s.runnable)
                                       for s in self._specs.values() if isinstance(s, CompiledSubagent)}
        self.call_graphs = GraphCache()
        """Graphs of children made for one call (:meth:`call_graph`), least recently used first out."""
        self._lock = threading.Lock()
        self.inherited_middleware: tuple[AgentMiddleware, ...] = tuple(inherited_middleware)
        """The parent's middleware, for children that inherit its model (the model-level ones apply)."""
        self.options = BuildOptions()
        if options is not None:
            self.configure(options)

    def configure(self, options: BuildOptions) -> None:
        """Set the build options (before the first graph is built), checking every spec's model and skills."""
        with self._lock:
            if self._graphs:
                raise UnsupportedCall("build options must be set before any subagent is built "
                                      f"(already built: {', '.join(sorted(self._graphs))})")
            for spec in self._specs.values():
                check_spec(spec, options)
            self.options = options

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._specs)

    @property
    def specs(self) -> tuple[AnySpec, ...]:
        return tuple(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def spec(self, name: str) -> AnySpec:
        """The spec registered as ``name``, or :class:`UnknownSubagent`."""
        try:
            return self._specs[name]
        except KeyError:
            valid = ", ".join(self._specs) or "none"
            raise UnknownSubagent(f"unknown subagent_type {name!r}; valid types are: {valid}") from None

    @property
    def built(self) -> frozenset[str]:
        """Names whose graphs have been compiled so far."""
        return frozenset(self._graphs)

    def graph(self, name: str, *, parent_model: Any, parent_tools: Sequence[Any]) -> Any:
        """The child graph for ``name``, compiled on first use and then cached."""
        graph = self._graphs.get(name) or self._ready.get(name)
        if graph is not None:
            return graph
        spec = self.spec(name)
        with self._lock:
            graph = self._graphs.get(name)
            if graph is None and isinstance(spec, SubagentSpec):
                graph = self._graphs[name] = self.build(spec, parent_model=parent_model, parent_tools=parent_tools)
        return graph

    def call_graph(self, key: Hashable, spec: SubagentSpec, *, parent_model: Any, parent_tools: Sequence[Any]) -> Any:
        """The graph of a child made for one call (a created definition, a per-call format), kept by ``key``."""
        return self.call_graphs.get(key, lambda: self.build(spec, parent_model=parent_model, parent_tools=parent_tools))

    def build(self, spec: SubagentSpec, *, parent_model: Any, parent_tools: Sequence[Any]) -> Any:
        """Compile ``spec`` under the parent's floor (which a spec may tighten, never lower): the one place."""
        return build_subagent(spec, parent_model=parent_model, parent_tools=parent_tools, options=self.options,
                              inherited_middleware=self.inherited_middleware)
