"""The base of every stack config model: camelCase keys, nothing unknown, frozen, documented fields, and no control
or format character in any string."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

from gb300.config.checks import PathError
from gb300.config.text import UNPRINTABLE_MESSAGE, printable_problem


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

    @model_validator(mode="after")
    def _printable(self) -> ConfigModel:
        """No string of the stack config holds a control or format character (NUL, CR, ESC, U+2028, a bidi
        override...): values are printed in plans, pull requests and terminals, and tags reach Azure and the nodes.
        Each model checks its own strings (lists and mappings of them included); nested models check theirs."""
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            if isinstance(value, BaseModel) or (
                isinstance(value, list) and value and all(isinstance(v, BaseModel) for v in value)
            ):
                continue
            problem = printable_problem(value)
            if problem is not None:
                where, what = problem
                raise PathError((field.alias or name, *where), UNPRINTABLE_MESSAGE.format(what=what), relative=True)
        return self
