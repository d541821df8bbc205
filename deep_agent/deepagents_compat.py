"""deepagents' file tools, skills, memory and permissions for the root, from deepagents itself.

``create_deep_agent(backend=, skills=, memory=, permissions=)`` takes
deepagents' arguments and composes deepagents' own maintained middleware
(``FilesystemMiddleware``, ``SkillsMiddleware``, ``MemoryMiddleware``) into
the root's stack, rather than a rewrite of them; delegation stays ours.
They need the ``deepagents`` extra (``pip install
"governed-subagents[deepagents]"``); without it, asking for any of them is
an error that says so.

Children inherit the tools these middleware give the root, by the one rule
every ``task`` child follows: a child inherits the tools of the parent's
tool node (minus the delegation tools), with the state keys those tools
declare (``files`` for the file tools, shared both ways). The middleware's
own prompt text and hooks stay with the root.

Example::

    from deepagents.backends import FilesystemBackend

    agent = create_deep_agent(model, backend=FilesystemBackend(root_dir="."), memory=["/AGENTS.md"],
                              skills=["/skills/"], permissions=[{"operations": ["write"], "paths": ["/**"],
                                                                 "mode": "deny"}])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from subagents.errors import SpecError, SubagentsError

EXTRA_INSTALL = 'pip install "governed-subagents[deepagents]"'
"""What to run to get deepagents' middleware."""

DEFAULT_MODEL = "anthropic:claude-sonnet-4-6"
"""deepagents' default model, used (with its deprecation warning) when ``model=None``."""

MODEL_NONE_WARNING = (
    "Passing `model=None` to `create_deep_agent` is deprecated, as in deepagents: its default "
    f"({DEFAULT_MODEL}) is used. Specify a model explicitly (e.g. 'openai:gpt-4.1-mini')."
)


class MissingExtraError(SubagentsError, ImportError):
    """An argument needs an optional dependency that is not installed.

    Under the library's one error base (``SubagentsError``) and an
    ``ImportError``, which a caller may already catch.

    Attributes:
        arguments: the arguments that asked for it.
        extra: the extra to install.
    """

    def __init__(self, where: str, arguments: Sequence[str], extra: str = "deepagents") -> None:
        self.arguments, self.extra = tuple(arguments), extra
        names = ", ".join(repr(a) for a in arguments)
        super().__init__(
            f"{where}(): argument {names} uses deepagents' middleware, which is not installed: "
            f'pip install "governed-subagents[{extra}]"'
        )


def _given(value: Any) -> bool:
    return value is not None and not (isinstance(value, (list, tuple, set, frozenset)) and not value)


def deepagents_root_middleware(
    *,
    backend: Any = None,
    skills: Sequence[str] | None = None,
    memory: Sequence[str] | None = None,
    permissions: Sequence[Any] | None = None,
    existing: Sequence[Any] = (),
) -> list[Any]:
    """deepagents' middleware for what was asked, in deepagents' order; ``[]`` when nothing was.

    ``backend`` defaults to deepagents' ``StateBackend`` (the ``files`` state
    key). A middleware of the same name in ``existing`` (the caller's own
    ``middleware=``) wins, as in deepagents, and is not added twice.
    ``permissions`` are ``FilesystemPermission`` rules or dicts of their fields.

    Raises:
        MissingExtraError: deepagents is not installed.
        ValueError: a permission rule is malformed or asks for ``"interrupt"``.
    """
    asked = [name for name, value in (("backend", backend), ("skills", skills), ("memory", memory),
                                      ("permissions", permissions)) if _given(value)]
    if not asked:
        return []
    try:
        from deepagents.backends import StateBackend
        from deepagents.middleware.filesystem import FilesystemMiddleware
        from deepagents.middleware.memory import MemoryMiddleware
        from deepagents.middleware.skills import SkillsMiddleware
    except ImportError:
        raise MissingExtraError("create_deep_agent", asked) from None
    store = backend if backend is not None else StateBackend()
    taken = {getattr(mw, "name", None) for mw in existing}
    stack: list[Any] = []
    if FilesystemMiddleware.__name__ not in taken:
        stack.append(FilesystemMiddleware(backend=store, permissions=_permissions(permissions)))
    if _given(skills) and SkillsMiddleware.__name__ not in taken:
        stack.append(SkillsMiddleware(backend=store, sources=list(_paths("skills", skills))))
    if _given(memory) and MemoryMiddleware.__name__ not in taken:
        stack.append(MemoryMiddleware(backend=store, sources=list(_paths("memory", memory)), add_cache_control=True))
    return stack


def deepagents_backend(
    backend: Any = None,
    *,
    skills: Sequence[str] | None = None,
    memory: Sequence[str] | None = None,
    permissions: Sequence[Any] | None = None,
) -> Any:
    """The deepagents backend the agent's files live on: ``backend``, or deepagents' ``StateBackend`` default.

    As in deepagents, ``skills=``, ``memory=`` or ``permissions=`` without a
    ``backend`` mean the ``files`` state key, and a spec's skill paths are
    read from there too. ``None`` when none of the four was given (call
    :func:`deepagents_root_middleware` first: it raises when the extra is
    missing).
    """
    if backend is not None or not any(_given(v) for v in (skills, memory, permissions)):
        return backend
    from deepagents.backends import StateBackend

    return StateBackend()


def _paths(argument: str, value: Any) -> Sequence[str]:
    if isinstance(value, str) or not all(isinstance(p, str) for p in value):
        raise ValueError(f"create_deep_agent(): argument {argument!r}: expected a list of backend paths (str), "
                         f"got {type(value).__name__}")
    return list(value)


def _permissions(rules: Sequence[Any] | None,
                 where: str = "create_deep_agent(): argument 'permissions'") -> list[Any] | None:
    """Rules as ``FilesystemPermission`` objects; an ``interrupt`` rule is refused with what to write."""
    if not _given(rules):
        return None
    from deepagents.middleware.filesystem import FilesystemPermission

    out = []
    for i, rule in enumerate(rules or ()):
        if isinstance(rule, Mapping):
            try:
                rule = FilesystemPermission(**rule)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{where}, item {i}: {exc}") from None
        if not isinstance(rule, FilesystemPermission):
            raise ValueError(f"{where}, item {i}: expected a "
                             f"FilesystemPermission or a dict of its fields, got {type(rule).__name__}")
        if rule.mode == "interrupt":
            # The approval would need deepagents' private predicate on HumanInTheLoopMiddleware.
            raise ValueError(
                f"{where}, item {i}: mode 'interrupt' is not supported; "
                "ask for approval with interrupt_on={'write_file': True, ...} and keep 'allow'/'deny' rules here"
            )
        out.append(rule)
    return out


def general_purpose_with_root_skills(
    specs: Sequence[Any], *, enabled: bool, backend: Any = None, skills: Sequence[str] | None = None,
) -> list[Any]:
    """``specs`` with a ``general-purpose`` child that has the root's deepagents skills, as in deepagents.

    In deepagents the general-purpose child inherits ``skills=`` (a custom
    child only gets the skills its spec names); here too: it gets its own
    deepagents ``SkillsMiddleware`` over the same backend and sources. When
    no skills were given, general-purpose is off, or a spec already has the
    name, ``specs`` are returned as they are.
    """
    from middleware.task_tool import (
        GENERAL_PURPOSE_DESCRIPTION,
        GENERAL_PURPOSE_NAME,
        GENERAL_PURPOSE_PROMPT,
    )
    from subagents.spec import SubagentSpec

    names = {s.get("name") if isinstance(s, Mapping) else getattr(s, "name", None) for s in specs}
    if not enabled or not _given(skills) or GENERAL_PURPOSE_NAME in names:
        return list(specs)
    from deepagents.backends import StateBackend
    from deepagents.middleware.skills import SkillsMiddleware

    store = backend if backend is not None else StateBackend()
    general = SubagentSpec(name=GENERAL_PURPOSE_NAME, description=GENERAL_PURPOSE_DESCRIPTION,
                           system_prompt=GENERAL_PURPOSE_PROMPT,
                           middleware=[SkillsMiddleware(backend=store, sources=list(_paths("skills", skills)))])
    return [general, *specs]


def backend_skills_for_specs(specs: Sequence[Any], *, backend: Any = None) -> list[Any]:
    """Dict specs whose ``skills`` are paths on ``backend`` get deepagents' ``SkillsMiddleware``, as in deepagents.

    Only when the agent has a deepagents backend (``backend=``, or the
    ``StateBackend`` that ``skills=``, ``memory=`` or ``permissions=`` bring,
    see :func:`deepagents_backend`): then a
    spec's ``skills`` entry with a ``/`` is a skill source on that backend
    (deepagents' meaning) and becomes the child's own ``SkillsMiddleware``;
    other entries stay skill names from ``skills_dirs``. Without a backend,
    specs are returned as they are (their ``skills`` are names or local folders).
    """
    if backend is None:
        return list(specs)
    from deepagents.middleware.skills import SkillsMiddleware

    out: list[Any] = []
    for spec in specs:
        skills = spec.get("skills") if isinstance(spec, Mapping) else None
        sources = [s for s in skills or () if isinstance(s, str) and "/" in s]
        if not sources:
            out.append(spec)
            continue
        rest = [s for s in skills or () if s not in sources]
        changed = {k: v for k, v in spec.items() if k != "skills"}
        if rest:
            changed["skills"] = rest
        changed["middleware"] = [*(spec.get("middleware") or ()), SkillsMiddleware(backend=backend, sources=sources)]
        out.append(changed)
    return out


def backend_permissions_for_specs(specs: Sequence[Any], *, backend: Any = None) -> list[Any]:
    """Dict specs with ``permissions`` get deepagents' ``FilesystemMiddleware`` under those rules, as in deepagents.

    Only when the agent has a deepagents backend (see
    :func:`deepagents_backend`): the child then gets its own file tools over
    that backend, under its own rules, in place of the root's (which carry the
    root's rules: a spec's rules replace the parent's, as in deepagents). A
    spec that inherits the root's tools has the root's file tools left out;
    one with its own ``tools`` gains the file tools. Without a backend, specs
    are returned as they are (and ``permissions`` is refused when the spec is
    read, saying what to write instead).

    Raises:
        SpecError: a rule is malformed or asks for ``"interrupt"``, or the
            spec's ``middleware`` already has a ``FilesystemMiddleware``
            (give it the rules instead).
    """
    if backend is None:
        return list(specs)
    from deepagents.middleware.filesystem import FilesystemMiddleware

    out: list[Any] = []
    for spec in specs:
        rules = spec.get("permissions") if isinstance(spec, Mapping) else None
        if not _given(rules):
            out.append(spec)
            continue
        label = f"subagent {spec.get('name')!r}: field 'permissions'"
        own = list(spec.get("middleware") or ())
        if any(isinstance(mw, FilesystemMiddleware) for mw in own):
            raise SpecError(f"{label}: the spec's middleware has its own FilesystemMiddleware; "
                            "give it the rules (FilesystemMiddleware(permissions=...)) instead")
        try:
            files = FilesystemMiddleware(backend=backend, permissions=_permissions(rules, label))
        except ValueError as exc:
            raise SpecError(str(exc)) from None
        changed = {k: v for k, v in spec.items() if k != "permissions"}
        changed["middleware"] = [*own, files]
        if spec.get("tools") is None:
            # The root's file tools carry the root's rules: this child's own replace them.
            left_out = [*(spec.get("disallowed_tools") or ()), *(t.name for t in files.tools)]
            changed["disallowed_tools"] = list(dict.fromkeys(left_out))
        out.append(changed)
    return out
