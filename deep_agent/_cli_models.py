"""How the command line resolves the ``model:`` names of agent files.

Agent files written for Claude Code say ``model: sonnet`` (or ``opus``,
``haiku``, ``inherit``). The command line runs every agent on the run's
model unless ``--model-profiles FILE`` maps the name to another one; each
such fallback is announced in one notice line. A name that is neither an
alias, a profile, ``inherit`` nor ``provider:model`` is an error whose hint
names the flags to pass, unless ``--unknown-model inherit``.

Example::

    plan = plan_models(specs, read_profiles(Path("profiles.yaml")), unknown_model="error")
    plan.profiles     # {'sonnet': 'inherit', 'fast': 'openai:gpt-4.1-mini'}
    plan.notice       # "model sonnet (reviewer) runs on the run's model; map a name to ... --model-profiles FILE"
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from deep_agent._cli_errors import UsageError

CLAUDE_ALIASES: tuple[str, ...] = ("sonnet", "opus", "haiku")
INHERIT = "inherit"


@dataclasses.dataclass
class ModelPlan:
    """The profiles to build with, the one-line notice, and the files whose model cannot resolve."""

    profiles: dict[str, Any]
    notice: str | None
    problems: dict[str, str]
    """Agent name -> the error for its model name (with the flags that fix it)."""


def read_profiles(path: Path | None) -> dict[str, Any]:
    """The ``--model-profiles`` file: a mapping of name to model (YAML or JSON)."""
    if path is None:
        return {}
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise UsageError(f"--model-profiles {path}: cannot be read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"--model-profiles {path}: invalid YAML or JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"--model-profiles {path}: expected a mapping of profile name to model")
    return data


def plan_models(specs: Iterable[Any], profiles: Mapping[str, Any], *, unknown_model: str) -> ModelPlan:
    """Map every model name the specs use to a profile; collect notices and problems."""
    chosen: dict[str, Any] = dict(profiles)
    fallbacks: dict[str, list[str]] = {}
    problems: dict[str, str] = {}
    for spec in specs:
        for name in _model_names(spec):
            if name in profiles or name == INHERIT or ":" in name:
                continue
            if name in CLAUDE_ALIASES or unknown_model == INHERIT:
                chosen[name] = INHERIT
                fallbacks.setdefault(name, []).append(spec.name)
            else:
                problems[spec.name] = (
                    f"field 'model' {name!r} is not 'inherit', 'provider:model' or a known profile; "
                    f"pass --model-profiles FILE (with a line `{name}: provider:model`) or "
                    "--unknown-model inherit"
                )
    notice = None
    if fallbacks:
        named = [f"{name} ({', '.join(sorted(set(agents)))})" for name, agents in sorted(fallbacks.items())]
        listed = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
        verb = "runs" if len(named) == 1 else "run"
        notice = (f"model{'s' if len(named) > 1 else ''} {listed} {verb} on the run's model; "
                  "map a name to another model with --model-profiles FILE")
    return ModelPlan(profiles=chosen, notice=notice, problems=problems)


def _model_names(spec: Any) -> list[str]:
    names = []
    for value in (getattr(spec, "model", None), (getattr(spec, "condenser", None) or {}).get("model")):
        if isinstance(value, str):
            names.append(value.strip())
    return names
