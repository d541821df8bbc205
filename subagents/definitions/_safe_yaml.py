"""Loading untrusted YAML within fixed bounds of time and memory.

A definition file is read from anywhere (a cloned repository, a shared
folder), so its YAML is treated as hostile:

* **Size.** :data:`MAX_FILE_BYTES` per file, checked before reading.
* **Nesting.** :data:`MAX_DEPTH` levels of collections, checked as each
  collection is opened, before the composer recurses into it, so deep
  nesting is an error, never a ``RecursionError``.
* **Values and aliases.** An alias is cheap to parse and expensive to use:
  nine aliases of nine aliases of ... (a "billion laughs" bomb) load as a
  few shared lists that expand to billions of items when validated or
  printed. A file's *expanded* size (every alias counted as a full copy of
  what it points to) is capped at :data:`MAX_EXPANDED_NODES`, counted while
  composing so the refusal costs no more than the cap; an alias inside
  its own anchor (a value that never ends) is refused too.
* **Tags.** Safe loading only: ``!!python/...`` is refused, never run.

Example::

    data = load_bounded("tools: [a, b]")     # {'tools': ['a', 'b']}
    load_bounded("a: &x [1]\\nb: [*x, *x]")   # fine: 5 nodes
    load_bounded(BOMB)                        # raises YAMLBoundError
    load_bounded("tools: [" + "a," * 30_000 + "]")   # YAMLBoundError after 20,001 values
"""

from __future__ import annotations

import re
from typing import Any

import yaml

MAX_FILE_BYTES = 1024 * 1024
"""Largest definition file read, in bytes."""

MAX_DEPTH = 32
"""Deepest nesting of mappings and lists accepted."""

MAX_EXPANDED_NODES = 20_000
"""Most YAML values a document may hold once every alias is expanded."""


class YAMLBoundError(yaml.YAMLError):
    """The YAML is too deep, or holds too many values; ``line`` is 0-based or ``None``."""

    def __init__(self, message: str, line: int | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.field = field


class UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses duplicate keys instead of keeping the last."""


class DuplicateKey(yaml.constructor.ConstructorError):
    def __init__(self, key: str, mark: yaml.Mark) -> None:
        super().__init__(None, None, f"duplicate key '{key[:60]}'", mark)
        self.key = key[:60]


def _construct_mapping(loader: UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[str] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, str):
            continue
        if key in seen:
            raise DuplicateKey(key, key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


def _construct_int(loader: UniqueKeyLoader, node: yaml.ScalarNode) -> Any:
    try:
        return loader.construct_yaml_int(node)
    except ValueError:  # Python refuses to convert more than sys.get_int_max_str_digits() digits
        raise yaml.constructor.ConstructorError(
            None, None, f"an integer of {len(str(node.value))} characters is too long; "
            "expected a number of usual size (quote it to keep it as text)", node.start_mark,
        ) from None


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


_BRACKETS = re.compile(r"[\[\]{}]")


class ValueBudget:
    """How many values one file may hold, shared by every YAML document read from it.

    The lenient fallback reads each top-level field as its own document;
    one budget for all of them keeps :data:`MAX_EXPANDED_NODES` per file.
    """

    def __init__(self, limit: int = MAX_EXPANDED_NODES) -> None:
        self.limit = limit
        self.used = 0
        """Values so far, each alias counted as a full copy of what it points to."""
        self.written = 0
        """Values so far as written, aliases not expanded."""


def check_brackets(source: str) -> None:
    """Raise :class:`YAMLBoundError` if brackets nest far deeper than :data:`MAX_DEPTH`.

    Counted on the text, quotes and all, before the scanner runs: PyYAML's
    scanner slows down with the square of the flow depth, so a line of
    ``[[[[...`` must be refused first (twice the depth leaves room for
    brackets inside strings). The exact depth is checked while composing.
    """
    depth = 0
    for match in _BRACKETS.finditer(source):
        depth += 1 if match.group() in "[{" else -1
        if depth > 2 * MAX_DEPTH:
            line = source.count("\n", 0, match.start())
            raise YAMLBoundError(f"nests deeper than {MAX_DEPTH} levels; expected flat fields", line)


class BoundedLoader(UniqueKeyLoader):
    """Composes within :data:`MAX_DEPTH` and a :class:`ValueBudget`, stopping at the first value past either.

    Counting as nodes are made (not after the whole document is composed)
    makes a refusal cost at most the bound, however large the file: PyYAML's
    composer is pure Python, and a 1 MiB flow list takes many seconds.
    """

    def __init__(self, source: str, budget: ValueBudget) -> None:
        super().__init__(source)
        self.budget = budget
        self._sizes: dict[int, int] = {}  # id(node) -> expanded size, once the node is complete
        self._open = 0
        self._field: tuple[int, str | None] | None = None

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self._open == 1 and isinstance(parent, yaml.MappingNode):  # a top-level key or value
            scalar = isinstance(index, yaml.ScalarNode)
            self._field = (index.start_mark.line, str(index.value)[:60]) if scalar else None
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            size = self._sizes.get(id(node))
            if size is None:  # its anchor's collection is still open: it contains itself
                raise self._error("an alias refers to the collection it is in (a value that "
                                  "never ends); expected plain values", event)
            self._charge(size, event, alias=True)
            return node
        if isinstance(event, yaml.CollectionStartEvent) and self._open >= MAX_DEPTH:
            raise self._error(f"nests deeper than {MAX_DEPTH} levels; expected flat fields", event)
        before = self.budget.used
        self._charge(1, event, alias=False)
        self._open += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._open -= 1
        self._sizes[id(node)] = self.budget.used - before
        return node

    def _charge(self, values: int, event: yaml.Event, *, alias: bool) -> None:
        budget = self.budget
        budget.used += values
        budget.written += 0 if alias else 1
        if budget.used <= budget.limit:
            return
        if budget.written == budget.used:
            raise self._error(f"holds more than {budget.limit} values; expected a short definition", event)
        raise self._error(f"its aliases expand to more than {budget.limit} values (an alias bomb?); "
                          "expected plain values", event)

    def _error(self, message: str, event: yaml.Event) -> YAMLBoundError:
        """The error at the top-level field being composed (its key's line), else at ``event``."""
        if self._field is not None:
            return YAMLBoundError(message, *self._field)
        return YAMLBoundError(message, event.start_mark.line if event.start_mark else None)


def load_bounded(source: str, budget: ValueBudget | None = None) -> Any:
    """``source`` loaded safely (duplicate keys refused), or :class:`YAMLBoundError`.

    ``budget`` is the file's when several documents share one (a fresh one
    otherwise). Other problems raise PyYAML's own errors (syntax, tags,
    :class:`DuplicateKey`).
    """
    check_brackets(source)
    loader = BoundedLoader(source, budget if budget is not None else ValueBudget())
    try:
        node = loader.get_single_node()
        return None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()
