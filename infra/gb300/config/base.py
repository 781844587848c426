"""The base of every stack config model: camelCase keys, nothing unknown, frozen, documented fields, no control or
format character in any string, and the one runner of the sections' checks.

Syntax and ranges are the fields' own (pydantic's types, and the field checks of :mod:`gb300.config.checks`
attached to them). A check that reads several values of a section is a public ``check_*`` method of that section's
model, registered in its ``CHECKS`` beside it, as AWS ParallelCluster's config classes register their validators
(``_register_validators`` in ``cli/src/pcluster/config/cluster_config.py``):

    class BlobSettings(ConfigModel):
        def check_unique_containers(self) -> None: ...
        CHECKS: ClassVar[Checks] = (check_unique_containers,)

:meth:`ConfigModel.run_checks`, the only model validator, runs the checks of a model's classes, the base's first and
each class's in its ``CHECKS`` order, once the model's fields have parsed. A check raises
:class:`~gb300.config.checks.PathError` naming the full key path; the first one raised is the model's problem.
``tests/config/test_check_registry.py`` proves every check is registered and none runs another way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

from gb300.config.checks import PathError
from gb300.config.text import UNPRINTABLE_MESSAGE, printable_problem

__all__ = ["Check", "Checks", "ConfigModel", "checks_of"]

Check = Callable[[Any], None]
"""A check of a section: called with the parsed model, it returns None or raises a PathError."""
Checks = tuple[Check, ...]


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

    def check_printable(self) -> None:
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

    CHECKS: ClassVar[Checks] = (check_printable,)

    @model_validator(mode="after")
    def run_checks(self) -> ConfigModel:
        """Run every check registered for this model's classes (:func:`checks_of`), in order."""
        for check in checks_of(type(self)):
            check(self)
        return self


@functools.cache
def checks_of(model: type[ConfigModel]) -> Checks:
    """The checks a model runs: each class's ``CHECKS`` from :class:`ConfigModel` down to ``model``."""
    return tuple(check for cls in reversed(model.__mro__) for check in vars(cls).get("CHECKS", ()))
