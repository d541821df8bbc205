"""Child graphs built per call (a dynamic definition, a per-call schema), cached and bounded.

The registry builds each declared spec once. Graphs that depend on the call
(a definition made at run time, an output schema chosen per call) are built
on first use and kept in a small least-recently-used cache per registry,
keyed by a hash of what they are built from, so repeated calls reuse one
graph and a stream of distinct schemas cannot grow memory without bound.

Example::

    graph = graphs_for(registry).get(("json", digest), lambda: build_subagent(...))
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

DEFAULT_MAX_GRAPHS = 32


class GraphCache:
    """A thread-safe LRU cache of built graphs."""

    def __init__(self, max_graphs: int = DEFAULT_MAX_GRAPHS) -> None:
        if max_graphs < 1:
            raise ValueError(f"max_graphs must be >= 1 (got {max_graphs})")
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
            graph = build()
            self._graphs[key] = graph
            while len(self._graphs) > self.max_graphs:
                self._graphs.popitem(last=False)
            return graph


_BY_OWNER: weakref.WeakKeyDictionary[Any, GraphCache] = weakref.WeakKeyDictionary()
_OWNERS_LOCK = threading.Lock()


def graphs_for(owner: Any) -> GraphCache:
    """The cache that belongs to ``owner`` (a registry); it goes when the owner goes."""
    with _OWNERS_LOCK:
        cache = _BY_OWNER.get(owner)
        if cache is None:
            cache = _BY_OWNER[owner] = GraphCache()
        return cache
