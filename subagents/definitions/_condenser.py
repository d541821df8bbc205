"""The ``condenser`` field: LangChain's ``SummarizationMiddleware`` on the child (its settings: docs/agent-files.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from subagents._errors import SpecError

CondenserSetting = Literal[False] | Mapping[str, Any] | None

DEFAULT_TRIGGER_FRACTION = 0.8
DEFAULT_TRIGGER_TOKENS = 64_000  # the window unknown: below the common 128k windows, far above a subtask's
DEFAULT_KEEP = ("messages", 20)

CONDENSER_KEYS = ("trigger", "keep", "model", "summary_prompt", "trim_tokens_to_summarize")
_KINDS = ("tokens", "messages", "fraction")
_OFF = {"none", "false", "off", "no", "disabled"}
_DEFAULT = {"default", "true", "on", "yes", "summarize", "summarise"}


def normalize_condenser(value: Any) -> CondenserSetting:
    """``None`` (default), ``False`` (off) or a checked settings dict."""
    word = value.strip().lower() if isinstance(value, str) else None
    if value is None or value is True or word in _DEFAULT:
        return None
    if value is False or word in _OFF:
        return False
    if not isinstance(value, Mapping):
        raise SpecError("expected 'none'/false (off), 'default'/true, or a mapping of "
                        f"{', '.join(CONDENSER_KEYS)}, got {value!r}")
    unknown = sorted(str(k) for k in value if k not in CONDENSER_KEYS)
    if unknown:
        raise SpecError(f"unknown condenser setting(s) {', '.join(unknown)}; expected only "
                        f"{', '.join(CONDENSER_KEYS)}")
    settings = dict(value)
    if "trigger" in settings:
        settings["trigger"] = _trigger(settings["trigger"])
    if "keep" in settings:
        settings["keep"] = _size(settings["keep"], "keep")
    for key in ("model", "summary_prompt"):
        if key in settings and not (isinstance(settings[key], str) and settings[key].strip()):
            raise SpecError(f"condenser {key}: expected a non-empty string, got {settings[key]!r}")
    trim = settings.get("trim_tokens_to_summarize")
    if trim is not None and (not isinstance(trim, int) or isinstance(trim, bool) or trim <= 0):
        raise SpecError(f"condenser trim_tokens_to_summarize: expected a positive integer, got {trim!r}")
    return settings


def _size(value: Any, what: str) -> tuple[str, int | float]:
    if isinstance(value, (list, tuple)) and len(value) == 2 and value[0] in _KINDS:
        kind, amount = value
        fraction = kind == "fraction" and isinstance(amount, (int, float)) and 0 < amount <= 1
        count = kind != "fraction" and isinstance(amount, int) and amount > 0
        if not isinstance(amount, bool) and (fraction or count):
            return (kind, amount)
    raise SpecError(f"condenser {what}: expected [tokens, N], [messages, N] (N a positive integer) or "
                    f"[fraction, F] (0 < F <= 1), got {value!r}")


def _trigger(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _size([k, v], "trigger")[1] for k, v in value.items()}
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (list, tuple, Mapping)) for v in value):
        return [_trigger(v) for v in value]
    return _size(value, "trigger")


def describe_condenser(setting: CondenserSetting) -> str:
    """``default``, ``off``, or the settings, for listings."""
    if setting is None:
        return "default"
    return "off" if setting is False else ", ".join(f"{k}={v!r}" for k, v in setting.items())


def condenser_middleware(setting: CondenserSetting, model: Any, *, resolve_summarizer: Callable[[str], Any]) -> Any:
    """The ``SummarizationMiddleware`` for a child, or ``None`` when it is off (``resolve_summarizer``: its model)."""
    if setting is False:
        return None
    from langchain.agents.middleware import SummarizationMiddleware

    settings = dict(setting or {})
    if "trigger" not in settings:
        profile = getattr(model, "profile", None)
        window = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
        known = isinstance(window, int) and window > 0
        settings["trigger"] = ("fraction", DEFAULT_TRIGGER_FRACTION) if known else ("tokens", DEFAULT_TRIGGER_TOKENS)
    settings.setdefault("keep", DEFAULT_KEEP)
    summarizer = settings.pop("model", None)
    if summarizer is not None:
        settings["summarizer"] = resolve_summarizer(summarizer)
    return SummarizationMiddleware(model, **settings)
