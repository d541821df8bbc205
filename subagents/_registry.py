"""Name -> subagent, with each child graph built lazily and at most once.

Constructing a registry validates every spec but compiles nothing: a parent
with 100 subagents pays for a child graph only when it first delegates to it.

Example::

    registry = SubagentRegistry([{"name": "a", "description": "does a"}])
    registry.names            # ('a',)
    graph = registry.graph("a", parent_model=model, parent_tools=[])

Caller-wide build settings (model profiles, skills, risky tools, the
parent's permission policy) travel as :class:`~subagents.BuildOptions`::

    registry = SubagentRegistry(specs, options=BuildOptions(risky_tools={"shell"}))
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from subagents._build_options import BuildOptions, check_spec
from subagents._builder import UnknownToolPolicy, build_subagent
from subagents._compiled_runnable import ready_runnable
from subagents._spec import AnySpec, CompiledSubagent, SubagentSpec, coerce_specs


class UnknownSubagent(LookupError):
    """The requested subagent type is not registered; the message lists the valid ones."""


class SubagentRegistry:
    """Validated specs by name, and the compiled graphs built from them so far."""

    def __init__(
        self,
        specs: Sequence[AnySpec | Mapping[str, Any]],
        *,
        unknown_tools: UnknownToolPolicy = "warn",
        options: BuildOptions | None = None,
    ) -> None:
        self._specs: dict[str, AnySpec] = {s.name: s for s in coerce_specs(specs)}
        self._graphs: dict[str, Any] = {}
        self._ready: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.unknown_tools: UnknownToolPolicy = unknown_tools
        self.inherited_middleware: Sequence[Any] | Callable[[], Sequence[Any]] = ()
        """The parent's middleware (or how to find it), for children that inherit its model."""
        self.options = BuildOptions()
        if options is not None:
            self.configure(options)

    def configure(self, options: BuildOptions) -> None:
        """Set the build options, checking every spec's model and skills against them.

        Only before the first graph is built: a graph built under other
        options would not match them.
        """
        with self._lock:
            if self._graphs:
                raise RuntimeError(
                    "build options must be set before any subagent is built "
                    f"(already built: {', '.join(sorted(self._graphs))})"
                )
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
            raise UnknownSubagent(
                f"unknown subagent_type {name!r}; valid types are: {valid}"
            ) from None

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
            if graph is None and isinstance(spec, CompiledSubagent):
                # A caller's runnable: stamped and made async-capable, never "built".
                graph = self._ready.setdefault(name, ready_runnable(name, spec.runnable))
                return graph
            if graph is None and isinstance(spec, SubagentSpec):
                graph = build_subagent(
                    spec,
                    parent_model=parent_model,
                    parent_tools=parent_tools,
                    unknown_tools=self.unknown_tools,
                    options=self.options,
                    inherited_middleware=self.inherited_middleware,
                )
                self._graphs[name] = graph
        return graph
