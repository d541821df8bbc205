"""What a subagent is: a declarative :class:`SubagentSpec`, a caller's :class:`CompiledSubagent`, or a
:class:`RemoteSubagentSpec` served by a LangGraph Server (which sends what it says, nothing from the environment:
``langgraph-sdk`` on its own would send ``LANGSMITH_API_KEY`` to any url)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import functools
import importlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, TypedDict, cast
from urllib.parse import unquote, urlsplit, urlunsplit

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from subagents._boundary import ContextMode, held_until_it_returns
from subagents._errors import RemoteConfigError, SpecError, brief
from subagents._metering import WrapUpSetting
from subagents._truncation import RetryTruncatedSetting
from subagents.definitions._condenser import CondenserSetting, normalize_condenser
from subagents.definitions._models import check_model_name
from subagents.definitions._permissions import PermissionMode, normalize_permission_mode
from subagents.definitions._skills import check_skill_entry


def normalize_tools(value: Any) -> Any:
    """A spec's ``tools`` (names, ``BaseTool`` objects, callables made tools, tool dicts) checked; ``None`` passes."""
    if value is None:
        return None
    sequence = isinstance(value, (list, tuple)) or (hasattr(value, "__iter__") and hasattr(value, "__len__")
                                                    and not isinstance(value, Mapping))
    if isinstance(value, (str, bytes)) or not sequence:
        raise SpecError("expected a list of tool names, BaseTools, functions or tool dicts, "
                        f"not one {type(value).__name__}")
    return tuple(_one_tool(item, index) for index, item in enumerate(value))


def _one_tool(item: Any, index: int) -> str | BaseTool | dict[str, Any]:
    if isinstance(item, (str, BaseTool)):
        if isinstance(item, str) and not item.strip():
            raise SpecError(f"item {index}: a tool name must not be empty")
        return item
    if isinstance(item, Mapping):
        function = item.get("function")
        name = item.get("name") or (function.get("name") if isinstance(function, Mapping) else None)
        if not (isinstance(name, str) and name):
            raise SpecError(f"item {index}: a tool dict needs a 'name' (or 'function': {{'name': ...}})")
        return dict(item)
    if callable(item):
        from langchain_core.tools import tool

        try:
            return cast("BaseTool", tool(item))
        except Exception as exc:  # noqa: BLE001 - reported with the item named
            name = getattr(item, "__name__", type(item).__name__)
            raise SpecError(f"item {index} ({name}): cannot be made a tool: {exc}") from None
    raise SpecError(f"item {index}: expected a tool name, BaseTool, function or tool dict, "
                    f"got {type(item).__name__}")


def ready_runnable(name: str, runnable: Any) -> Any:
    """``runnable`` stamped with ``name`` (as deepagents does), given a threaded ``ainvoke`` if it lacks one."""
    stamped = runnable
    with_config = getattr(runnable, "with_config", None)
    if callable(with_config):  # a copy: the caller's runnable is never changed
        with contextlib.suppress(Exception):  # a runnable that refuses config still runs, unstamped
            stamped = with_config({"metadata": {"lc_agent_name": name}, "run_name": name})
        if not callable(getattr(stamped, "invoke", None)):
            stamped = runnable
    return stamped if callable(getattr(stamped, "ainvoke", None)) else ThreadedRunnable(stamped, name)


class ThreadedRunnable:
    """An object with only ``invoke``, driven on a worker thread by ``ainvoke``; ``name`` stamped on every run."""

    def __init__(self, runnable: Any, name: str) -> None:
        self.runnable = runnable
        self.name = name

    def invoke(self, inputs: Any, config: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        stamped = {"run_name": self.name, **(config or {})}
        stamped["metadata"] = {**(stamped.get("metadata") or {}), "lc_agent_name": self.name}
        return self.runnable.invoke(inputs, stamped, **kwargs)

    async def ainvoke(self, inputs: Any, config: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        context = contextvars.copy_context()
        # A child cancelled at its timeout_s cannot stop the thread: until it returns, it keeps the task's place.
        return await held_until_it_returns(
            asyncio.to_thread(context.run, functools.partial(self.invoke, inputs, config, **kwargs)))


# -- A plain dict with a spec's keys is accepted wherever a spec is (coerce_spec); agent files load into the same model.

NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")
"""Letters, digits, ``-``, ``_``, single inner dots: a safe path part. ``fullmatch`` it (``$`` accepts a newline)."""
MAX_NAME_LENGTH = 128

DEFAULT_MAX_TURNS = 25
"""Model calls a child may make when its spec sets no ``max_turns``."""

MAX_TIMEOUT_S = 1_000_000.0  # the largest timeout_s accepted (about 11 days): finite, within what threads can wait


def _check_name(value: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_NAME_LENGTH or not NAME_PATTERN.fullmatch(value):
        raise SpecError("name must be letters, digits, '-', '_' and single inner dots, at most "
                        f"{MAX_NAME_LENGTH} characters (got {brief(value)})")
    return value


def _loaded(module: str, name: str) -> Callable[[Any], Any]:
    """A definitions validator imported on first use: the MCP client or hook runner loads only for a spec using it."""
    return lambda value: None if value is None else getattr(
        importlib.import_module(f"subagents.definitions._{module}"), name)(value)


Slug = Annotated[str, AfterValidator(_check_name)]
SkillEntry = Annotated[str, AfterValidator(check_skill_entry)]


class SubagentSpec(BaseModel):
    """A subagent built by :func:`langchain.agents.create_agent` on first use.

    Fields left ``None`` inherit from the parent: ``tools`` (minus every delegation tool), ``model`` (also
    ``"inherit"``; a name without ``provider:`` is a profile in the caller's ``model_profiles``), ``permission_mode``,
    and the caller's settings (``retry_truncated``, ``wrap_up``, ``short_answer_threshold``). ``max_turns`` caps model
    calls (default :data:`DEFAULT_MAX_TURNS`). Every field is described in docs/specs.md.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", frozen=True)

    name: Slug
    description: str
    system_prompt: str = ""
    tools: Annotated[Sequence[str | BaseTool | dict[str, Any]] | None, BeforeValidator(normalize_tools)] = None
    disallowed_tools: Sequence[str] = ()
    model: Annotated[str | BaseChatModel | None,
                     BeforeValidator(lambda value: check_model_name(value) if isinstance(value, str) else value)] = None
    # Strict: a YAML ``yes`` or ``"10"`` must not silently become a limit.
    max_turns: int | None = Field(default=None, gt=0, strict=True)
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False, strict=True)
    recursion_limit: int | None = Field(default=None, gt=0, strict=True)
    max_budget_per_run: float | None = Field(default=None, gt=0, allow_inf_nan=False, strict=True)
    max_tokens: int | None = Field(default=None, gt=0, strict=True)
    short_answer_threshold: int | None = Field(default=None, ge=0, strict=True)
    response_format: Any = None
    middleware: Sequence[Any] = ()
    interrupt_on: Mapping[str, Any] | None = None
    permission_mode: Annotated[PermissionMode | None, BeforeValidator(normalize_permission_mode)] = None
    skills: Sequence[SkillEntry] = ()
    # Off for specs in code (no extra graph step); an agent file that omits it gets default summarisation.
    condenser: Annotated[CondenserSetting, BeforeValidator(normalize_condenser)] = False
    mcp_config: Annotated[Mapping[str, Mapping[str, Any]] | None,
                          BeforeValidator(_loaded("mcp", "normalize_mcp_config"))] = None
    hooks: Annotated[Mapping[str, Any] | None, BeforeValidator(_loaded("hooks", "normalize_hooks"))] = None
    color: str | None = None
    source: str | None = None
    retries: int = Field(default=0, ge=0, le=10, strict=True)
    retry_truncated: RetryTruncatedSetting | None = None
    wrap_up: WrapUpSetting | None = None
    metadata: Mapping[str, Any] = Field(default_factory=dict)
    context: ContextMode = "isolated"

    @field_validator("description")
    @classmethod
    def _description_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise SpecError("description must not be empty: the parent picks agents by it")
        return value

    @field_validator("disallowed_tools", "skills", mode="before")
    @classmethod
    def _no_bare_string(cls, value: Any) -> Any:
        # A bare string would be iterated letter by letter.
        if isinstance(value, str):
            raise SpecError("expected a list of names, not one string")
        return value

    @field_validator("color")
    @classmethod
    def _color_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise SpecError("expected a colour name or #rrggbb, got an empty string")
        return value

    @field_validator("middleware")
    @classmethod
    def _middleware_are_agent_middleware(cls, value: Sequence[Any]) -> Sequence[Any]:
        from langchain.agents.middleware import AgentMiddleware

        for item in value:
            if not isinstance(item, AgentMiddleware):
                raise SpecError(f"expected AgentMiddleware instances, got {type(item).__name__}")
        return tuple(value)


class CompiledSubagent(BaseModel):
    """A subagent the caller built: any LangGraph graph whose state has ``messages``.

    Used as given (its own tools, model and limits); the runner still isolates its input, bounds it with
    ``timeout_s`` and ``recursion_limit``, refuses nested delegation and records it. ``runnable`` may be any
    ``Runnable`` or an object with only ``invoke`` (run on a worker thread by async callers). ``recursion_limit``
    defaults to the runnable's own (``with_config``), then the parent run's. deepagents spells it ``CompiledSubAgent``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", frozen=True)

    name: Slug
    description: str
    runnable: Any
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False, strict=True)
    recursion_limit: int | None = Field(default=None, gt=0, strict=True)
    metadata: Mapping[str, Any] = Field(default_factory=dict)
    context: ContextMode = "isolated"

    @field_validator("runnable")
    @classmethod
    def _runnable_invokable(cls, value: Any) -> Any:
        if not callable(getattr(value, "invoke", None)):
            raise SpecError("runnable must be a LangGraph graph or any Runnable (an object with invoke), "
                            f"got {type(value).__name__}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _runnables_own_limit(cls, data: Any) -> Any:
        # A limit bound with `with_config` is the runnable's own: the parent's never overrides it.
        if isinstance(data, Mapping) and data.get("recursion_limit") is None:
            config = getattr(data.get("runnable"), "config", None)
            own = config.get("recursion_limit") if isinstance(config, Mapping) else None
            if isinstance(own, int) and not isinstance(own, bool) and own > 0:
                return {**data, "recursion_limit": own}
        return data


CompiledSubAgent = CompiledSubagent
"""deepagents' spelling of :class:`CompiledSubagent`: the same class."""

AnySpec = SubagentSpec | CompiledSubagent


def describe_validation_error(errors: ValidationError, label: str) -> str:
    """One line naming ``label`` and each bad field with what was expected."""
    parts = []
    for err in errors.errors():
        field = ".".join(str(p) for p in err["loc"]) or "<spec>"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        parts.append(f"field '{field}': {msg}")
    return f"{label}: " + "; ".join(parts)


def coerce_spec(value: AnySpec | Mapping[str, Any], *, source: str | None = None) -> AnySpec:
    """A validated spec from a spec or a dict (with ``runnable``: a :class:`CompiledSubagent`), or a
    :class:`SpecError` naming the agent (or ``source``) and each bad field."""
    if isinstance(value, (SubagentSpec, CompiledSubagent)):
        return value
    if not isinstance(value, Mapping):
        raise SpecError(f"{source or 'subagent'}: expected a SubagentSpec, CompiledSubagent or dict, "
                        f"got {type(value).__name__}")
    label = source or f"subagent {value.get('name', '<unnamed>')!r}"
    if "graph_id" in value and "runnable" not in value:
        raise SpecError(f"{label}: an async subagent (with 'graph_id') runs as a background task: pass it in "
                        "create_deep_agent(subagents=...) or to BackgroundSubagentMiddleware, not to the task tool")
    # deepagents' spellings made ours: ``mode`` becomes ``context``, and its own defaults, spelled out, ask for
    # nothing (skills=None, permissions=None or []); other ``permissions`` are refused.
    unset = {k for k in ("skills", "permissions")
             if k in value and (value[k] is None or (isinstance(value[k], (list, tuple)) and not value[k]))}
    mode = value.get("mode", "isolated")
    if mode not in ("isolated", "fork"):
        raise SpecError(f"{label}: field 'mode': expected 'isolated' or 'fork', got {brief(mode)}")
    if mode == "fork" and value.get("context", "fork") != "fork":
        raise SpecError(f"{label}: field 'mode': 'fork' contradicts context={value['context']!r}; give one of them")
    if "permissions" in value and "permissions" not in unset:
        raise SpecError(f"{label}: field 'permissions' (deepagents' filesystem rules) needs the agent's deepagents "
                        "backend: create_deep_agent(backend=...), or its skills=, memory= or permissions=; otherwise "
                        "limit the child with 'tools'/'disallowed_tools' and ask for approval with "
                        "'permission_mode' or 'interrupt_on' (see docs/migrating.md)")
    value = {k: v for k, v in value.items() if k != "mode" and k not in unset} | (
        {"context": "fork"} if mode == "fork" else {})
    cls = CompiledSubagent if "runnable" in value else SubagentSpec
    try:
        return cls.model_validate(dict(value))
    except ValidationError as exc:
        raise SpecError(describe_validation_error(exc, label)) from None


def coerce_specs(values: Sequence[AnySpec | Mapping[str, Any]]) -> list[AnySpec]:
    """Validate many specs and reject duplicate names."""
    specs = [coerce_spec(v) for v in values]
    names = [spec.name for spec in specs]
    if (twice := next((name for i, name in enumerate(names) if name in names[:i]), None)) is not None:
        raise SpecError(f"duplicate subagent name {twice!r}: each name must be unique")
    return specs


# -- The dict shapes of specs under deepagents' names (``TypedDict``\ s: plain dicts at run time).


class SubAgent(TypedDict):
    """A declarative subagent as a dict (see :class:`~subagents.SubagentSpec` for every field)."""

    name: str
    description: str
    system_prompt: NotRequired[str]
    tools: NotRequired[Sequence[Any | Callable[..., Any] | dict[str, Any] | str]]
    model: NotRequired[Any]
    middleware: NotRequired[Sequence[Any]]
    interrupt_on: NotRequired[Mapping[str, Any]]
    skills: NotRequired[Sequence[str]]
    response_format: NotRequired[Any]
    max_turns: NotRequired[int]
    timeout_s: NotRequired[float]
    short_answer_threshold: NotRequired[int]
    retries: NotRequired[int]
    retry_truncated: NotRequired[bool | str]
    wrap_up: NotRequired[bool | float]
    mode: NotRequired[Literal["isolated", "fork"]]
    permissions: NotRequired[Sequence[Any]]


class AsyncSubAgent(TypedDict):
    """A subagent served by a LangGraph Server (without ``url``: the parent's own), run as a background task."""

    name: str
    description: str
    graph_id: str
    url: NotRequired[str]
    headers: NotRequired[Mapping[str, str]]
    webhook: NotRequired[str]
    update_strategy: NotRequired[Literal["interrupt", "enqueue"]]
    notify_parent: NotRequired[bool]
    mode: NotRequired[Literal["isolated", "fork"]]


def is_async_spec(value: Any) -> bool:
    """Whether a spec is a remote one for the background tools (deepagents' ``AsyncSubAgent``)."""
    return isinstance(value, RemoteSubagentSpec) or (isinstance(value, Mapping) and "graph_id" in value
                                                     and "runnable" not in value)


API_KEY_HEADER = "x-api-key"
SAME_DEPLOYMENT = "this same deployment (in-process)"  # a remote spec without a url: the parent's own server
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


class RemoteSubagentSpec(BaseModel):
    """A background subagent served by a LangGraph Server.

    Args:
        name, description: as for a local subagent.
        graph_id: the graph (or assistant id) on the server.
        url: the server's ``http(s)://`` base URL; ``None``: the LangGraph Server the parent runs on, in-process.
        headers: sent with every request to this server, and nothing else is (no key from the environment unless
            ``api_key_env`` names it).
        api_key: sent as ``x-api-key``; never shown in a repr.
        url_credentials: ``user:password`` sent as HTTP basic auth; never shown (credentials in ``url`` move here).
        api_key_env: the environment variable holding the key, read at the first request.
        timeout_s: bound on the whole task from its start (a follow-up starts it again); at the deadline the run is
            cancelled on the server and the task ends ``error``.
        request_timeout_s, start_timeout_s: bound on each status request; on starting, steering or cancelling.
        config: the run config sent with each run (``{"recursion_limit": 50}``).
        metadata: more metadata for each task's server thread.
        webhook: an ``http(s)`` URL the server calls when each run ends; the record is still polled.
        update_strategy, mode, notify_parent: deepagents' ``AsyncSubAgent`` keys, accepted with the one behaviour
            this library has: a follow-up interrupts the running run, ``"isolated"``, and a finished task announced
            before the parent's next model call.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    graph_id: str
    url: Annotated[str | None, AfterValidator(lambda value: None if value is None else checked_url(value))] = None
    headers: Mapping[str, str] = Field(default_factory=dict)
    api_key: SecretStr | None = None
    url_credentials: SecretStr | None = None
    api_key_env: str | None = None
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False, strict=True)
    request_timeout_s: float = Field(default=10.0, gt=0, le=3600, allow_inf_nan=False, strict=True)
    start_timeout_s: float = Field(default=30.0, gt=0, le=3600, allow_inf_nan=False, strict=True)
    config: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] = Field(default_factory=dict)
    webhook: str | None = None
    update_strategy: Literal["interrupt"] = "interrupt"
    mode: Literal["isolated"] = "isolated"
    notify_parent: bool = True

    @field_validator("name")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not NAME_PATTERN.fullmatch(value):
            raise SpecError(f"name must be a slug of letters, digits, '-' and '_' (got {value[:80]!r})")
        return value

    @field_validator("description", "graph_id")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise SpecError("must not be empty")
        return value

    @model_validator(mode="before")
    @classmethod
    def _credentials_out_of_the_url(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or not isinstance(data.get("url"), str):
            return data
        bare, credentials = split_url_credentials(data["url"])
        if credentials is None:
            return data
        if data.get("url_credentials") is not None:
            raise SpecError("give the url's credentials one way only, not in url and url_credentials")
        return {**data, "url": bare, "url_credentials": credentials}

    @property
    def server(self) -> str:
        """Where the tasks run, as errors and notes name it: the url, or :data:`SAME_DEPLOYMENT`."""
        return self.url if self.url is not None else SAME_DEPLOYMENT

    @field_validator("webhook")
    @classmethod
    def _webhook_url(cls, value: str | None) -> str | None:
        if value is not None:
            checked_url(value)  # the check only: a webhook's path is the receiver's, kept as written
            value = value.strip()
        return value

    @field_validator("headers")
    @classmethod
    def _header_lines(cls, value: Mapping[str, str]) -> Mapping[str, str]:
        for key, text in value.items():
            if not _HEADER_NAME.fullmatch(key):
                raise SpecError(f"header name {key[:80]!r} is not a valid HTTP header name")
            if (problem := header_value_problem(text)) is not None:
                raise SpecError(f"header {key!r} {problem}")
        return value

    @field_validator("api_key")
    @classmethod
    def _key_text(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and (problem := header_value_problem(value.get_secret_value())) is not None:
            raise SpecError(f"the key {problem} (it is sent as the {API_KEY_HEADER} header)")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise SpecError(f"must be an environment variable name (got {value[:80]!r})")
        return value

    @model_validator(mode="after")
    def _one_key_source(self) -> RemoteSubagentSpec:
        if self.url is None and self.url_credentials is not None:
            raise SpecError("url_credentials need a url: a spec without one runs on this same deployment")
        if self.url_credentials is not None and any(k.lower() == "authorization" for k in self.headers):
            raise SpecError("give the Authorization one way only, not url credentials and headers['Authorization']")
        key_header = any(k.lower() == API_KEY_HEADER for k in self.headers)
        sources = [n for n, on in (("api_key", self.api_key is not None), ("api_key_env", self.api_key_env is not None),
                                   ("headers['x-api-key']", key_header)) if on]
        if len(sources) > 1:
            raise SpecError(f"give the API key one way only, not {' and '.join(sources)}")
        return self

    def request_headers(self) -> dict[str, str]:
        """Every header this spec's requests carry (the key included, if one is configured)."""
        headers = dict(self.headers)
        if self.url_credentials is not None:
            token = base64.b64encode(self.url_credentials.get_secret_value().encode()).decode("ascii")
            headers["Authorization"] = f"Basic {token}"
        if self.api_key is not None:
            headers[API_KEY_HEADER] = self.api_key.get_secret_value()
        elif self.api_key_env is not None:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise RemoteConfigError(f"remote subagent {self.name!r}: api_key_env names {self.api_key_env!r}, "
                                        "which is not set in the environment")
            if (problem := header_value_problem(key)) is not None:
                raise RemoteConfigError(f"remote subagent {self.name!r}: the key in {self.api_key_env!r} {problem} "
                                        f"(it is sent as the {API_KEY_HEADER} header)")
            headers[API_KEY_HEADER] = key
        return headers


def header_value_problem(text: str) -> str | None:
    """Why ``text`` cannot be sent as an HTTP header value (printable ASCII, no surrounding space), or ``None``."""
    if "\r" in text or "\n" in text:
        return "must not contain line breaks"
    bad = next((c for c in text if not (" " <= c <= "~" or c == "\t")), None)
    if bad is not None:
        return f"must be printable ASCII (it holds {bad!r}, U+{ord(bad):04X})"
    return "must not begin or end with a space or tab" if text != text.strip(" \t") else None


def split_url_credentials(url: str) -> tuple[str, str | None]:
    """``url`` without its ``user:password@`` part, and that part (``None`` when it has none)."""
    with contextlib.suppress(ValueError):  # an unparsable url has no credentials to move: checked_url refuses it
        parts = urlsplit(url.strip())
        if "@" in parts.netloc:
            userinfo, _, host = parts.netloc.rpartition("@")
            return urlunsplit(parts._replace(netloc=host)), unquote(userinfo)
    return url, None


def checked_url(value: str) -> str:
    """``value`` without a trailing slash if it is an http(s) URL with a host; else :class:`SpecError`."""
    text = value.strip() if isinstance(value, str) else ""
    try:
        parts = urlsplit(text)
        host = parts.hostname
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        parts, host = None, None
    if parts is None or parts.scheme not in ("http", "https") or not host:
        raise SpecError(f"url must be an http:// or https:// URL with a host, such as http://127.0.0.1:2024 "
                        f"(got {split_url_credentials(str(value))[0][:120]!r})")
    return text.rstrip("/")

