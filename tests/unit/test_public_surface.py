"""The public surface is each package's ``__all__``, everything else private by name; the public constructors stay
small: the rest is one typed settings object."""

import ast
import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

from deep_agent import ScriptedChatModel, create_deep_agent
from middleware import BackgroundSubagentMiddleware, SubAgentMiddleware

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p.relative_to(ROOT) for top in ("deep_agent", "middleware", "subagents")
                 for p in (ROOT / top).rglob("*.py"))
INITS = [p for p in SOURCES if p.name == "__init__.py" and not any(part.startswith("_") for part in p.parts[:-1])]


def test_every_module_but_a_packages_init_is_private_by_name() -> None:
    # `__init__.py` and `__main__.py` start with `_` too: a module is public if no part of its dotted path does.
    public = [str(p) for p in SOURCES if not any(part.startswith("_") for part in p.with_suffix("").parts)]
    assert not public, f"modules outside __all__ with a public name (make them _name.py): {public}"


@pytest.mark.parametrize("init", INITS, ids=str)
def test_an_init_defines_no_public_name_outside_its_all(init: Path) -> None:
    # The names its imports bind are test_architecture's (no side door); these are the ones it defines.
    package = ".".join(init.parts[:-1])
    defined = set()
    for node in ast.parse((ROOT / init).read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    public = {name for name in defined if not name.startswith("_")}
    assert public <= set(__import__(package, fromlist=["__all__"]).__all__), f"{init}: {sorted(public)}"


def test_the_readme_docs_and_notebooks_import_public_names_only() -> None:
    private = re.compile(r"(?:from|import)\s+((?:deep_agent|middleware|subagents)(?:\.\w+)*\._\w+"
                         r"|(?:deep_agent|middleware|subagents)(?:\.\w+)*\s+import\s+\(?\s*_\w+)")
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "notebooks").glob("*.ipynb")]
    found = [f"{page.relative_to(ROOT)}: {m}" for page in pages for m in private.findall(page.read_text())]
    assert not found, found

def test_an_exported_error_names_its_package_from_its_first_raise() -> None:
    # A process of its own, where no package name has been read yet: the private modules alone are imported.
    code = ("import pickle, traceback\nfrom subagents._errors import McpServerError, RuntimeClosed, SpecError\n"
            "from deep_agent._testing import ScriptExhausted\nimport subagents.background, subagents.definitions\n"
            "print(*(c.__module__ for c in (SpecError, RuntimeClosed, McpServerError, ScriptExhausted)))\n"
            "error = pickle.loads(pickle.dumps(SpecError('bad')))\n"
            "print(type(error) is SpecError, traceback.format_exception_only(error)[-1].strip())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["subagents subagents.background subagents.definitions deep_agent",
                                "True subagents.SpecError: bad"]
    for package in ("subagents", "subagents.background", "subagents.definitions", "middleware", "deep_agent"):
        module = importlib.import_module(package)
        errors = [v for v in map(module.__getattr__, module.__all__)
                  if isinstance(v, type) and issubclass(v, BaseException) and v.__module__.startswith(package)]
        assert {e.__module__ for e in errors} <= {package}, package


DEEPAGENTS = ["model", "tools", "system_prompt", "middleware", "subagents", "skills", "memory", "permissions",
              "backend", "interrupt_on", "response_format", "state_schema", "context_schema", "checkpointer",
              "store", "debug", "name", "cache"]


def parameters(callable_) -> list[str]:
    return [p for p in inspect.signature(callable_).parameters if p != "self"]


def test_create_deep_agent_takes_deepagents_arguments_and_a_few_more():
    names = parameters(create_deep_agent)
    assert len(names) <= 24, names
    assert set(DEEPAGENTS) <= set(names) and "settings" in names


@pytest.mark.parametrize("callable_", [create_deep_agent, SubAgentMiddleware, BackgroundSubagentMiddleware])
def test_an_option_is_a_keyword_or_a_setting_never_both(callable_) -> None:
    from subagents._settings import _GROUP_OF

    assert not set(parameters(callable_)) & set(_GROUP_OF)


def test_create_deep_agent_checks_its_interrupt_on() -> None:
    with pytest.raises(TypeError, match="argument 'interrupt_on': expected a mapping of tool name to rule"):
        create_deep_agent(ScriptedChatModel(), interrupt_on=["write_file"])


def test_the_middlewares_take_at_most_eleven():
    assert len(parameters(SubAgentMiddleware.__init__)) <= 11
    assert len(parameters(BackgroundSubagentMiddleware.__init__)) <= 9
    for cls in (SubAgentMiddleware, BackgroundSubagentMiddleware):
        assert "settings" in parameters(cls.__init__)
