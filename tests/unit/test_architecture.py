"""The architecture holds as code: layering, no import cycle, public surfaces.

These read the source; nothing runs. A new file that breaks a rule fails here
with its name, so the layout the docs describe (docs/layout.md) stays true.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("deep_agent", "middleware", "subagents")
LAYER = {"subagents": 0, "middleware": 1, "deep_agent": 2}
PUBLIC_PACKAGES = (
    "subagents", "subagents.background", "subagents.definitions", "middleware", "deep_agent", "deep_agent.tools",
    "deep_agent.cli",
)


def sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def init_files() -> list[Path]:
    return sorted(p for p in sources() if p.name == "__init__.py")


def imported_modules(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return found


def relative(path: Path) -> Path:
    return path.relative_to(ROOT)


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(relative(p)))
def test_dependencies_point_one_way(path: Path) -> None:
    own = relative(path).parts[0]
    for module in imported_modules(ast.parse(path.read_text())):
        top = module.split(".")[0]
        if top in LAYER:
            assert LAYER[top] <= LAYER[own], f"{relative(path)} imports {module} (a higher layer)"


def module_name(path: Path) -> str:
    parts = list(relative(path).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_edges() -> dict[str, set[str]]:
    """Every project module -> the project modules it imports, nested imports included.

    Importing ``a.b.c`` runs ``a.b``'s ``__init__`` first, so an import also
    depends on each package above its target that is not above the importer:
    that is how ``spec -> definitions.hooks`` once closed a loop through
    ``definitions/__init__ -> agent_files -> spec``.
    """
    known = {module_name(p) for p in sources()}
    edges: dict[str, set[str]] = {}
    for path in sources():
        me = module_name(path)
        is_package = path.name == "__init__.py"
        mine = {".".join(me.split(".")[:i]) for i in range(1, me.count(".") + 2)}
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = me.split(".") if is_package else me.split(".")[:-1]
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            for name in names:
                parts = name.split(".")
                for i in range(1, len(parts) + 1):
                    target = ".".join(parts[:i])
                    if target in known and target not in mine:
                        targets.add(target)
        edges[me] = targets
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_anywhere_nested_imports_included() -> None:
    assert _cycles(_import_edges()) == []


def test_the_cycle_check_sees_a_cycle_through_a_nested_import() -> None:
    # The check itself can fail: a loop closed only by a function-level import is found.
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_the_library_imports_nothing_from_the_cli_or_the_built_in_tools() -> None:
    for module, targets in _import_edges().items():
        if module.startswith(("middleware", "subagents")):
            assert not {t for t in targets if t.startswith(("deep_agent.cli", "deep_agent.tools"))}, module


def _only_re_exports(node: ast.stmt) -> bool:
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.Expr)):
        return True
    if isinstance(node, ast.If):  # `if TYPE_CHECKING:` imports, for type checkers only
        return ast.unparse(node.test) == "TYPE_CHECKING" and all(_only_re_exports(n) for n in node.body)
    # a module-level __getattr__ re-exports lazily (deep_agent: `--help` does not load LangChain)
    return isinstance(node, ast.FunctionDef) and node.name == "__getattr__"


@pytest.mark.parametrize("path", init_files(), ids=lambda p: str(relative(p)))
def test_init_files_only_re_export(path: Path) -> None:
    for node in ast.parse(path.read_text()).body:
        assert _only_re_exports(node), (
            f"{relative(path)} defines {type(node).__name__} at line {node.lineno}"
        )


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_all_is_the_whole_public_surface_sorted_with_no_side_door(package: str) -> None:
    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names {missing}, which it does not define"
    assert list(module.__all__) == sorted(set(module.__all__)), f"{package}.__all__ is not sorted, or repeats a name"
    init = ROOT / Path(*package.split(".")) / "__init__.py"
    imported = set()
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            imported.update(alias.asname or alias.name for alias in node.names)
    side_doors = sorted(imported - set(module.__all__) - {"TYPE_CHECKING", "Any", "lazy_exports"})
    assert not side_doors, f"{package} imports {side_doors} without listing them in __all__"


def _text_files() -> list[Path]:
    folders = [*PACKAGES, "tests", "bench", "notebooks", ".ci", "docs"]
    found = [p for folder in folders for p in (ROOT / folder).rglob("*") if p.is_file()
             and p.suffix in {".py", ".md", ".ipynb", ".toml", ".yaml", ".json", ""}]
    return sorted([*found, *ROOT.glob("*.md"), *ROOT.glob("*.toml"), *ROOT.glob("*.json")])


def test_no_file_holds_an_unresolved_merge_conflict() -> None:
    """A merge's markers once sat in the README for a whole round: two versions of one section."""
    marked = []
    for path in _text_files():
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (UnicodeDecodeError, OSError):
            continue
        marked.extend(f"{path.relative_to(ROOT)}:{n}" for n, line in enumerate(lines, 1)
                      if line.startswith(("<<<<<<< ", ">>>>>>> ")) or line == "=======")
    assert not marked, marked


_ROLE = re.compile(r":(?:mod|class|func|data|meth|attr|exc):`~?((?:deep_agent|middleware|subagents)(?:\.\w+)+)`")


def _resolves(reference: str) -> bool:
    parts = reference.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def test_every_cross_reference_in_a_docstring_names_something_that_exists() -> None:
    broken = sorted(
        f"{relative(path)}: {match.group(1)}"
        for path in sources()
        for match in _ROLE.finditer(path.read_text())
        if not _resolves(match.group(1))
    )
    assert not broken, broken


def _layout_page_modules() -> list[str]:
    section = (ROOT / "docs" / "layout.md").read_text()
    table = section[section.index("| Step | Module |"):]
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    paths = [re.findall(r"`([\w/]+\.py)`", row)[-1] for row in rows]
    return [p.removesuffix(".py").replace("/", ".") for p in paths]


def test_one_delegation_crosses_the_modules_the_layout_page_lists_in_its_order() -> None:
    # In a process of its own: once a process has run a metered graph, every callback manager crosses the
    # meter's module first (subagents._metering._meter_node_calls), so another test's budget would reorder it.
    done = subprocess.run([sys.executable, "-m", "bench.trace"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=True)
    assert json.loads(done.stdout.splitlines()[0])["order"] == _layout_page_modules()
