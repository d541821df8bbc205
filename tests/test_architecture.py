"""The architecture holds as code: layering, file and function sizes, public surfaces.

These read the source; nothing runs. A new file that breaks a rule fails here
with its name, so the layout the README describes stays true.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("deep_agent", "middleware", "subagents")
LAYER = {"subagents": 0, "middleware": 1, "deep_agent": 2}
MAX_FILE_LINES = 350
MAX_FUNCTION_LINES = 60
PUBLIC_PACKAGES = ("subagents", "subagents.background", "subagents.definitions", "middleware", "deep_agent.tools")
MAX_TOP_LEVEL_NAMES = 40


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
            # `from middleware import _prompts` reaches into a module just the same
            found.extend(f"{node.module}.{alias.name}" for alias in node.names if alias.name.startswith("_"))
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


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(relative(p)))
def test_no_module_reaches_into_another_packages_private_modules(path: Path) -> None:
    own = relative(path).parts[0]
    for module in imported_modules(ast.parse(path.read_text())):
        parts = module.split(".")
        if parts[0] in LAYER and parts[0] != own:
            assert not any(p.startswith("_") for p in parts[1:]), (
                f"{relative(path)} imports {module}, private to {parts[0]}"
            )


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(relative(p)))
def test_files_and_functions_stay_small(path: Path) -> None:
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_FILE_LINES, f"{relative(path)} has over {MAX_FILE_LINES} lines"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = _body_lines(node)
            assert length <= MAX_FUNCTION_LINES, f"{relative(path)}:{node.lineno} {node.name} has {length} lines"


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's code lines: its body after the docstring.

    The signature and docstring do not count, so ``create_deep_agent`` can keep
    deepagents' keyword arguments (and document them) while its code stays short.
    """
    body = node.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return (node.end_lineno or node.lineno) - body[0].lineno + 1


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
def test_public_names_are_importable_and_few(package: str) -> None:
    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names {missing}, which it does not define"
    assert len(set(module.__all__)) == len(module.__all__), f"{package}.__all__ lists a name twice"
    if package == "subagents":
        assert len(module.__all__) <= MAX_TOP_LEVEL_NAMES, (
            f"subagents.__all__ has {len(module.__all__)} names; put the rest in a subpackage"
        )


def _text_files() -> list[Path]:
    folders = [*PACKAGES, "tests", "bench", "notebooks", ".ci"]
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
