"""The ``task`` tool's argument schema.

Models sometimes put the real instructions under an invented key (``prompt``,
``instructions``) and leave a label in ``description``. Such calls are
rejected, so the model is told to retry instead of a child running on the
label alone.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator

# The tool node validates the arguments after injecting these, so
# `extra="forbid"` cannot be used.
_INJECTED_ARGS = frozenset({"runtime"})


class TaskToolInput(BaseModel):
    """Arguments of the ``task`` tool."""

    description: str = Field(
        description=(
            "The complete task for the subagent: every instruction, the context it needs, "
            "and the form of the answer to return. The subagent sees nothing else."
        )
    )
    subagent_type: str = Field(
        description="The name of the subagent to use, from <available_agents>."
    )

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(map(str, data)) - set(cls.model_fields) - _INJECTED_ARGS)
            if unknown:
                raise ValidationError.from_exception_data(
                    cls.__name__,
                    [
                        {
                            "type": "value_error",
                            "loc": (key,),
                            "input": data[key],
                            "ctx": {
                                "error": ValueError(
                                    f"unexpected argument {key!r}; put all instructions "
                                    "for the subagent in `description`"
                                )
                            },
                        }
                        for key in unknown
                    ],
                )
        return data
