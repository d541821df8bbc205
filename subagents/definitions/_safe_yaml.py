"""Loading untrusted YAML within fixed bounds of time and memory.

A definition file is read from anywhere (a cloned repository, a shared
folder), so its YAML is treated as hostile:

* **Size.** :data:`MAX_FILE_BYTES` per file, checked before reading.
* **Nesting.** :data:`MAX_DEPTH` levels of collections, checked on the event
  stream (which PyYAML produces without recursion) before any node is
  composed, so deep nesting is an error, never a ``RecursionError``.
* **Aliases.** An alias is cheap to parse and expensive to use: nine
  aliases of nine aliases of ... (a "billion laughs" bomb) load as a few
  shared lists that expand to billions of items when validated or printed.
  The composed document's *expanded* size (every alias counted as a full
  copy of what it points to) is capped at :data:`MAX_EXPANDED_NODES`.
* **Tags.** Safe loading only: ``!!python/...`` is refused, never run.

Example::

    data = load_bounded("tools: [a, b]")     # {'tools': ['a', 'b']}
    load_bounded("a: &x [1]\\nb: [*x, *x]")   # fine: 5 nodes
    load_bounded(BOMB)                        # raises YAMLBoundError
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
    """The YAML is too deep, or its aliases expand too far; ``line`` is 0-based or ``None``."""

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


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


_BRACKETS = re.compile(r"[\[\]{}]")


def check_depth(source: str) -> None:
    """Raise :class:`YAMLBoundError` if collections nest deeper than :data:`MAX_DEPTH`.

    Brackets are counted first, quotes and all: PyYAML's scanner slows down
    with the square of the flow depth, so a line of ``[[[[...`` must be
    refused before it reaches the scanner (twice the depth leaves room for
    brackets inside strings).
    """
    depth = 0
    for match in _BRACKETS.finditer(source):
        depth += 1 if match.group() in "[{" else -1
        if depth > 2 * MAX_DEPTH:
            line = source.count("\n", 0, match.start())
            raise YAMLBoundError(f"nests deeper than {MAX_DEPTH} levels; expected flat fields", line)
    depth = 0
    for event in yaml.parse(source, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise YAMLBoundError(
                    f"nests deeper than {MAX_DEPTH} levels; expected flat fields",
                    event.start_mark.line if event.start_mark else None,
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def expanded_size(root: yaml.Node) -> int:
    """How many values ``root`` holds with every alias expanded (stops past the bound)."""
    sizes: dict[int, int] = {}
    # Post-order without recursion; a node reached again (an alias) reuses its size.
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_done or not children:
            total = 1 + sum(sizes.get(id(child), 0) for child in children)
            sizes[id(node)] = min(total, MAX_EXPANDED_NODES + 1)
            continue
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def _largest_field(root: yaml.Node) -> tuple[int, str | None]:
    """The line and key of the field the bomb goes off in.

    That is the last top-level field whose value expands past the bound: an
    alias comes after its anchor, so the last one is where it is used.
    """
    if not isinstance(root, yaml.MappingNode) or not root.value:
        return root.start_mark.line, None
    over = [key for key, value in root.value if expanded_size(value) > MAX_EXPANDED_NODES]
    key = over[-1] if over else root.value[-1][0]
    name = key.value if isinstance(key, yaml.ScalarNode) else None
    return key.start_mark.line, name[:60] if isinstance(name, str) else None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load_bounded(source: str) -> Any:
    """``source`` loaded safely (duplicate keys refused), or :class:`YAMLBoundError`.

    Other problems raise PyYAML's own errors (syntax, tags, :class:`DuplicateKey`).
    """
    check_depth(source)
    loader = UniqueKeyLoader(source)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if expanded_size(node) > MAX_EXPANDED_NODES:
            raise YAMLBoundError(
                f"its aliases expand to more than {MAX_EXPANDED_NODES} values "
                "(an alias bomb?); expected plain values",
                *_largest_field(node),
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()
