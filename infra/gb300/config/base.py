"""The base of every stack config model: camelCase keys, nothing unknown, frozen, documented fields."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class ConfigModel(BaseModel):
    """A mapping of the stack file: keys in camelCase, unknown keys refused, values frozen once parsed."""

    # Each field's docstring is its description: in `gb300 schema` and in docs/configuration.md (`gb300 docs`).
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        strict=False,
        use_attribute_docstrings=True,
    )
