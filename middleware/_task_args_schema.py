"""The ``task`` tool's argument schema for a given list of subagents.

``subagent_type`` is advertised as an ``enum`` of the agent names in the
tool's JSON schema, so providers that constrain generation to the schema
(llama.cpp's grammars, OpenAI's strict mode) can only produce a valid name.
Validation still accepts any string: a provider that ignores enums gets the
registry's readable "unknown subagent" error, which lists the valid names,
instead of a bare validation error.

Past :data:`ENUM_LIMIT` names the tool schema carries no enum (and the
tool description no list of names): a registry that large is listed once,
in the system prompt's ``<available_agents>`` block, so the parent does not
pay for every name three times on every call (providers also cap enum
sizes in strict schemas). The forced-delegation schema keeps its enum.

Example::

    schema = task_args_schema(["general-purpose", "researcher"])
    schema.model_json_schema()["properties"]["subagent_type"]["enum"]
    # ['general-purpose', 'researcher']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field, WithJsonSchema, create_model

from middleware._task_tool import TaskToolInput

SUBAGENT_TYPE_DESCRIPTION = "The name of the subagent to use, from <available_agents>."

ENUM_LIMIT = 100
"""Most agent names the ``task`` tool's schema lists as an enum; past it, none."""


def task_args_schema(names: Sequence[str], base: type[TaskToolInput] = TaskToolInput, *,
                     enum_limit: int | None = ENUM_LIMIT) -> type[TaskToolInput]:
    """``base`` (a :class:`TaskToolInput`) with ``subagent_type`` listing ``names`` as its enum.

    With no names, or more than ``enum_limit`` (``None``: no limit), ``base``
    itself (any string).
    """
    names = list(dict.fromkeys(str(n) for n in names))
    if not names or (enum_limit is not None and len(names) > enum_limit):
        return base
    enum_type: Any = Annotated[str, WithJsonSchema({"type": "string", "enum": names})]
    return create_model(
        base.__name__,
        __base__=base,
        __doc__=base.__doc__,
        # The enum lives in the annotation so that LangChain's copy of the
        # schema for the model (``tool_call_schema``) keeps it.
        subagent_type=(enum_type, Field(description=SUBAGENT_TYPE_DESCRIPTION)),
    )


def task_call_json_schema(names: Sequence[str], *, description_max_chars: int | None = None) -> dict[str, Any]:
    """The JSON schema of one ``task`` call's arguments, closed to other keys.

    ``subagent_type`` comes first; ``description_max_chars`` bounds the
    description (``maxLength``).

    Used as a ``response_format`` when a server constrains output to a
    schema but ignores ``tool_choice``.
    """
    schema = task_args_schema(names, enum_limit=None).model_json_schema()
    found = {
        key: {k: v for k, v in value.items() if k != "title"}
        for key, value in schema.get("properties", {}).items()
    }
    # The agent first: a reply cut short by a token limit then loses only
    # the end of the description, which can be closed and used.
    properties = {key: found[key] for key in sorted(found, key=lambda k: k != "subagent_type")}
    if description_max_chars is not None and "description" in properties:
        properties["description"]["maxLength"] = description_max_chars
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
