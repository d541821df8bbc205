"""Which model a subagent runs on: a profile name (mapped by the caller, so agent files stay portable), ``inherit``,
``provider:model``, or a bare name whose provider ``init_chat_model`` infers, in that order (docs/agent-files.md)."""

from __future__ import annotations

import functools
import logging
import re
import sys
import warnings
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel

from subagents._errors import SharedModelClient, SpecError

log = logging.getLogger(__name__)

INHERIT = "inherit"

ModelProfile = str | BaseChatModel | Mapping[str, Any]
ModelProfiles = Mapping[str, ModelProfile]
UnknownModelPolicy = Literal["error", "inherit"]

_MODEL_NAME = re.compile(r"[A-Za-z0-9][\w.\-/@]*(:[\w.\-/@:]+)?")


def check_model_name(value: str) -> str:
    """Check a model name's syntax (not whether it resolves); return it stripped."""
    name = value.strip()
    if not name:
        raise SpecError("expected 'inherit', 'provider:model' or a profile name, got ''")
    if not _MODEL_NAME.fullmatch(name) or name.endswith(":"):
        raise SpecError("expected 'inherit', 'provider:model' (e.g. 'openai:gpt-4.1-mini') or a "
                        f"profile name (letters, digits, '.', '-', '_'), got {value!r}")
    return name


def check_profiles(profiles: ModelProfiles | None) -> dict[str, ModelProfile]:
    """Validate a caller's profile mapping once; errors name the profile."""
    checked: dict[str, ModelProfile] = {}
    for name, value in (profiles or {}).items():
        where = f"profile {name!r}"
        if not isinstance(name, str) or not name or name == INHERIT:
            raise SpecError(f"{where}: expected a profile name other than 'inherit'")
        if isinstance(value, str):
            # A profile never names another profile: no chains, no loops.
            if value != INHERIT and ":" not in value and not inferred_provider(value):
                raise SpecError(f"{where}: expected 'inherit' or 'provider:model', got {value!r}")
        elif isinstance(value, Mapping):
            if not isinstance(value.get("model"), str):
                raise SpecError(f"{where}: expected init_chat_model keyword arguments with a 'model' string")
        elif not isinstance(value, BaseChatModel):
            raise SpecError(f"{where}: expected a 'provider:model' string, 'inherit', a BaseChatModel "
                            f"or a mapping of init_chat_model arguments, got {type(value).__name__}")
        checked[name] = value
    return checked


def lookup_model(model: str | BaseChatModel | None, *, agent: str, profiles: ModelProfiles | None = None,
                 unknown_model: UnknownModelPolicy = "error") -> ModelProfile:
    """What ``model`` stands for, unbuilt: ``"inherit"``, ``provider:model``, init kwargs, or a model."""
    if model is None or isinstance(model, BaseChatModel):
        return INHERIT if model is None else model
    profiles = profiles or {}
    if model in profiles:
        return profiles[model]
    if model == INHERIT or ":" in model or inferred_provider(model):
        return model
    known = ", ".join(sorted(profiles)) or "none given"
    message = (f"subagent {agent!r}: field 'model' {model!r} is not 'inherit', a 'provider:model' "
               f"string, a model name whose provider can be inferred (such as 'gpt-5.4') or a known "
               f"profile name (profiles: {known}); pass model_profiles="
               f"{{{model!r}: 'provider:model'}} or unknown_model='inherit'")
    if unknown_model == "inherit":
        log.warning("%s; using the parent's model", message)
        return INHERIT
    raise SpecError(message)


def inferred_provider(name: str) -> str | None:
    """The provider ``init_chat_model`` would infer for a bare model name, if any: LangChain's own rule,
    private with no public twin (docs/layout.md lists it; test_framework_internals guards it)."""
    from langchain.chat_models.base import _attempt_infer_model_provider

    return _attempt_infer_model_provider(name)


def resolve_model(model: str | BaseChatModel | None, parent_model: Any, *, agent: str,
                  profiles: ModelProfiles | None = None, unknown_model: UnknownModelPolicy = "error") -> Any:
    """The child's model: the parent's for ``None``/``"inherit"``, else the named one."""
    target = lookup_model(model, agent=agent, profiles=profiles, unknown_model=unknown_model)
    if isinstance(target, BaseChatModel):
        return target
    if target == INHERIT:
        if parent_model is None:
            raise SpecError(f"subagent {agent!r}: field 'model' inherits the parent's model, "
                            "but the parent's model is not known yet")
        return parent_model
    from langchain.chat_models import init_chat_model

    try:
        if isinstance(target, Mapping):
            kwargs = dict(target)
            return init_chat_model(kwargs.pop("model"), **kwargs)
        return init_chat_model(target)
    except Exception as exc:  # noqa: BLE001 - reported with the field named
        raise SpecError(f"subagent {agent!r}: field 'model' {model!r}: {exc}") from exc


def describe_model(model: str | BaseChatModel | None, *, agent: str, profiles: ModelProfiles | None = None,
                   unknown_model: UnknownModelPolicy = "error") -> str:
    """A one-line account of the resolution, for listings: ``sonnet -> anthropic:...``."""
    if isinstance(model, BaseChatModel):
        return type(model).__name__
    target = lookup_model(model, agent=agent, profiles=profiles, unknown_model=unknown_model)
    if isinstance(target, BaseChatModel):
        shown = type(target).__name__
    elif isinstance(target, Mapping):
        shown = f"{target.get('model_provider', '')}:{target['model']}".lstrip(":")
    else:
        shown = str(target)
    return shown if model in (None, shown) else f"{model} -> {shown}"


# A copy with an async HTTP client of its own, for another loop: a keep-alive connection opened on one loop fails on
# another, and LangChain's OpenAI and Anthropic integrations share one async pool among instances of the same
# settings. Anthropic takes no client argument: its ``_async_client`` cached property is filled instead.

# Where LangChain's integrations keep clients built from the other fields (left out of a copy).
CLIENT_FIELDS = frozenset({"client", "async_client", "root_client", "root_async_client", "http_async_client"})


def with_own_async_client(model: Any) -> tuple[Any, Callable[[], Awaitable[None]] | None]:
    """A copy of ``model`` whose async HTTP client is its own, and how to close that client; ``(model, None)``
    for a model with no client field, a client its caller chose (with a warning), or one that cannot be rebuilt."""
    if not isinstance(model, BaseChatModel):
        return model, None
    anthropic_family = _is_provider_model(model, "langchain_anthropic", "ChatAnthropic")
    if not anthropic_family and not any(getattr(model, f, None) is not None for f in CLIENT_FIELDS):
        return model, None  # no client of its own to replace (a scripted model keeps its script)
    openai_family = _is_provider_model(model, "langchain_openai.chat_models.base", "BaseChatOpenAI")
    proxied = openai_family and bool(getattr(model, "openai_proxy", None))
    if getattr(model, "http_async_client", None) is not None and not proxied:  # the caller's own client
        warnings.warn(SharedModelClient(type(model).__name__), stacklevel=2)
        return model, None
    # A proxied model's clients were both built from its proxy (the caller may not pass either).
    left_out = CLIENT_FIELDS | {"http_client"} if proxied else CLIENT_FIELDS
    settings = {name: getattr(model, name) for name in model.model_fields_set if name not in left_out}
    own = None
    if openai_family and not proxied:
        import openai

        own = settings["http_async_client"] = openai.DefaultAsyncHttpxClient()
    try:
        copy = type(model)(**settings)
    except Exception as exc:  # noqa: BLE001 - a model that cannot be rebuilt is used as it is
        log.warning("%s could not be rebuilt from its settings (%s); background children share its client",
                    type(model).__name__, exc)
        return model, None
    if anthropic_family:  # a fresh pool for the SDK client the integration would build (key, URL, retries...)
        import anthropic

        slot = getattr(type(copy), "_async_client", None)
        if not isinstance(slot, functools.cached_property):
            log.warning("%s keeps its async client in a way this library does not know; background children "
                        "share its connection pool with the parent", type(copy).__name__)
            return copy, None
        proxy = getattr(copy, "anthropic_proxy", None)
        http = anthropic.DefaultAsyncHttpxClient(**({"proxy": proxy} if proxy else {}))
        copy.__dict__["_async_client"] = slot.__get__(copy, type(copy)).with_options(http_client=http)
        return copy, http.aclose
    client = own if own is not None else getattr(copy, "http_async_client", None) if openai_family else None
    return copy, (client.aclose if client is not None else None)


def _is_provider_model(model: object, module: str, name: str) -> bool:
    """Whether ``model`` is a ``module.name``, never importing it (importing a provider SDK to ask costs seconds)."""
    loaded = sys.modules.get(module)
    cls = getattr(loaded, name, None)
    return isinstance(cls, type) and isinstance(model, cls)
