"""One base for every error and warning, the built-in bases callers catch, and the figures as fields."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import time
import uuid
import warnings
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

import deep_agent
import middleware
import subagents
from subagents._errors import (
    BudgetExceeded,
    InvalidArgument,
    InvalidArgumentType,
    MaxTurnsReached,
    McpServerError,
    RemoteAnswerError,
    RuntimeClosed,
    SpecError,
    StoredDataError,
    SubagentError,
    SubagentsError,
    SubagentsWarning,
    TaskStateError,
    TaskTimeout,
    TranscriptUnavailable,
    UnknownSubagent,
    UnknownTask,
    UnsupportedCall,
)
from subagents._metering import Budget, TaskMeter
from subagents.definitions._skills import SkillCatalog, skills_for


def _library_modules() -> list[str]:
    names = []
    for package in (deep_agent, middleware, subagents):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.endswith("__main__"):
                names.append(info.name)
    return names


def _defined_exception_classes() -> dict[str, type[BaseException]]:
    """Each exception class by the module whose source defines it (an exported one names its package)."""
    found = {}
    for name in _library_modules():
        module = importlib.import_module(name)
        for node in ast.parse(Path(str(module.__file__)).read_text()).body:
            value = getattr(module, node.name, None) if isinstance(node, ast.ClassDef) else None
            if isinstance(value, type) and issubclass(value, BaseException):
                found[f"{name}.{value.__qualname__}"] = value
    return found


def test_every_error_and_warning_class_of_the_library_sits_under_one_base():
    classes = _defined_exception_classes().values()
    assert len(classes) >= 30  # the walk found them: the library has some thirty
    outside = [f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, SubagentsError)]
    assert outside == []


# Also LangGraph's ParentCommand (how a refused root middleware call ends the run): defined beside the meter, where
# LangGraph is loaded already, so subagents._errors (which `deep-agent --help` imports) never loads it.
_BESIDE_LANGGRAPH = {"subagents._metering.RunEnded"}


def test_the_library_errors_live_in_one_module():
    elsewhere = [where for where in _defined_exception_classes()
                 if where.startswith(("subagents", "middleware")) and not where.startswith("subagents._errors.")]
    assert set(elsewhere) == _BESIDE_LANGGRAPH


@pytest.mark.parametrize(("error", "builtin"), [
    (SpecError, ValueError), (UnknownSubagent, LookupError), (RuntimeClosed, RuntimeError),
    (McpServerError, RuntimeError), (TaskStateError, ValueError), (SubagentsWarning, UserWarning),
    (InvalidArgument, ValueError), (InvalidArgumentType, TypeError), (UnsupportedCall, RuntimeError),
    (StoredDataError, ValueError), (RemoteAnswerError, ValueError), (TranscriptUnavailable, LookupError),
    (UnknownTask, KeyError),
])
def test_each_error_keeps_the_builtin_base_a_caller_may_already_catch(error, builtin):
    assert issubclass(error, builtin) and issubclass(error, SubagentsError)


# The raises of a built-in exception the library keeps, each for a reason (file, the raise's text).
_BUILTIN_RAISES = {
    # A module's __getattr__ must raise AttributeError: hasattr and ``from x import y`` read it.
    ("subagents/_exports.py", "raise AttributeError("),
    ("deep_agent/_deepagents.py", "raise AttributeError("),
    # Raised inside a try and wrapped at once into a library error naming the ledger or the server.
    ("subagents/_ledger.py", 'raise ValueError(f"it holds a'),
    ("subagents/definitions/_mcp.py", 'raise RuntimeError("its task had ended")'),
    # Its one caller catches it: a background start goes without the outcome file it names.
    ("subagents/background/_runtime.py", 'raise LookupError("an async SQLite checkpointer'),
    # A pydantic validator raises ValueError; the caller sees OutputSchemaViolation, or the model a tool error.
    ("subagents/_builder.py", "raise ValueError(violation)"),
    ("middleware/_task_tool.py", 'raise ValueError("`description` is empty'),
    ("middleware/_dynamic.py", "raise ValueError("),
}
_BUILTIN = re.compile(r"raise (ValueError|TypeError|RuntimeError|KeyError|LookupError|IndexError)\(")


def test_the_library_raises_its_own_errors_not_bare_builtins():
    root = Path(__file__).resolve().parents[3]
    found = set()
    for package in ("subagents", "middleware", "deep_agent"):
        for path in sorted((root / package).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            for line in path.read_text().splitlines():
                if _BUILTIN.search(line):
                    found.add((name, line.strip()))
    kept = {(name, line) for name, line in found for known, text in _BUILTIN_RAISES
            if name == known and line.startswith(text)}
    assert found - kept == set()


def test_a_bad_argument_is_a_library_error_and_still_the_builtin_a_caller_catches():
    from subagents._ledger import merge_async_records
    from subagents._registry import GraphCache
    from subagents.background import wait_for_background

    with pytest.raises(InvalidArgument, match="every_s must be a number of seconds > 0") as raised:
        wait_for_background({}, every_s=0)
    assert isinstance(raised.value, ValueError)
    with pytest.raises(SpecError, match=r"max_graphs must be >= 1 \(got 0\)"):
        GraphCache(max_graphs=0)
    with pytest.raises(StoredDataError, match="async_tasks: the update is a list, not a mapping"):
        merge_async_records({}, [])  # type: ignore[arg-type]


def test_a_missing_task_or_transcript_is_a_library_lookup_error_with_its_message_as_text():
    from subagents._transcripts import get_transcript, read_transcript

    with pytest.raises(UnknownTask) as raised:
        get_transcript({}, {"configurable": {"thread_id": "t"}}, "nope")
    assert isinstance(raised.value, KeyError)
    assert str(raised.value) == "no task 'nope' in the ledgers of thread 't'"  # not a KeyError's quoted repr
    with pytest.raises(TranscriptUnavailable, match="its in-memory transcript is gone") as gone:
        read_transcript({"id": "a", "transcript": f"memory:{uuid.uuid4()}"}, thread_id=None)
    assert isinstance(gone.value, LookupError)


def test_a_library_warning_is_caught_by_the_base_filter():
    with warnings.catch_warnings():
        warnings.simplefilter("error", SubagentsWarning)
        with pytest.raises(SubagentsError):
            skills_for(["./no-such-skill-folder"], SkillCatalog(), agent="s")


def test_a_spent_budget_reports_its_limit_and_what_was_spent():
    budget = Budget(max_tokens=100)
    budget.charge(None, 80, 30)
    with pytest.raises(BudgetExceeded) as caught:
        budget.reserve(10)
    assert (caught.value.limit, caught.value.spent, caught.value.unit) == (100, 110, "tokens")
    assert isinstance(caught.value, SubagentError) and caught.value.stop_reason == "budget"


def test_a_call_the_budget_cannot_cover_reports_the_token_limit():
    budget = Budget(max_tokens=100)
    budget.charge(None, 40, 10)
    with pytest.raises(BudgetExceeded) as caught:
        budget.reserve(60)
    assert (caught.value.limit, caught.value.spent, caught.value.unit) == (100, 50, "tokens")


def test_a_dollar_budget_reports_dollars():
    budget = Budget(max_usd=0.01, prices={"m": (1_000.0, 1_000.0)})
    budget.charge("m", 10, 10)
    with pytest.raises(BudgetExceeded) as caught:
        budget.reserve(1, "m")
    assert caught.value.unit == "usd" and caught.value.limit == 0.01 and caught.value.spent == pytest.approx(0.02)


def test_a_passed_deadline_reports_the_tasks_timeout():
    meter = TaskMeter(deadline=time.monotonic() - 1)
    meter.timeout_s = 2.5
    with pytest.raises(TaskTimeout) as caught:
        meter.raise_if_stopped()
    assert caught.value.timeout_s == 2.5 and caught.value.stop_reason == "timeout"


def test_one_model_call_past_max_turns_reports_max_turns():
    meter = TaskMeter(max_turns=1)
    meter.on_chat_model_start({}, [[HumanMessage("one")]], run_id=uuid.uuid4())
    with pytest.raises(MaxTurnsReached) as caught:
        meter.on_chat_model_start({}, [[HumanMessage("two")]], run_id=uuid.uuid4())
    assert caught.value.max_turns == 1 and caught.value.stop_reason == "max_turns"
