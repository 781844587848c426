"""Turning pydantic's validation errors into one line per key path, and :func:`parse`, which raises them."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import (
    BaseModel,
    ValidationError,
)

from gb300.config.checks import (
    NAMESPACE,
    PathError,
    format_path,
)
from gb300.config.models import StackConfig
from gb300.config.secrets import SECRET_KEYS, StackSecret, mask
from gb300.config.slurm import catalog_problems
from gb300.errors import ConfigError, Problem

# ---------------------------------------------------------------------------------------------------------
# Turning pydantic's errors into one line per key path.


_MESSAGES: dict[str, Callable[[Any, dict[str, Any]], str]] = {
    "missing": lambda got, ctx: "is required",
    "greater_than_equal": lambda got, ctx: f"must be at least {ctx['ge']} (got {got!r})",
    "less_than_equal": lambda got, ctx: f"must be at most {ctx['le']} (got {got!r})",
    "greater_than": lambda got, ctx: f"must be greater than {ctx['gt']} (got {got!r})",
    "less_than": lambda got, ctx: f"must be less than {ctx['lt']} (got {got!r})",
    "float_type": lambda got, ctx: f"must be a number (got {got!r})",
    "float_parsing": lambda got, ctx: f"must be a number (got {got!r})",
    "int_type": lambda got, ctx: f"must be a whole number (got {got!r})",
    "int_parsing": lambda got, ctx: f"must be a whole number (got {got!r})",
    "int_from_float": lambda got, ctx: f"must be a whole number (got {got!r})",
    "bool_type": lambda got, ctx: f"must be true or false (got {got!r})",
    "bool_parsing": lambda got, ctx: f"must be true or false (got {got!r})",
    "string_type": lambda got, ctx: f"must be a string (got {got!r}); quote numbers in YAML",
    "list_type": lambda got, ctx: f"must be a list (got {got!r})",
    "dict_type": lambda got, ctx: f"must be a mapping of keys to values (got {got!r})",
    "model_type": lambda got, ctx: f"must be a mapping of keys to values (got {got!r})",
    "model_attributes_type": lambda got, ctx: f"must be a mapping of keys to values (got {got!r})",
    "literal_error": lambda got, ctx: f"must be one of {ctx['expected']} (got {got!r})",
    "too_short": lambda got, ctx: f"must have at least {ctx['min_length']} item(s) (got {len(got or ())})",
    "string_too_short": lambda got, ctx: "must not be empty",
    "string_too_long": lambda got, ctx: f"must be at most {ctx['max_length']} characters (got {len(got)}: {got!r})",
    "string_pattern_mismatch": lambda got, ctx: f"must match {ctx['pattern']} (got {got!r})",
    "value_error": lambda got, ctx: str(ctx["error"]),
}


def _message(err: Mapping[str, Any], model_keys: list[str]) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        key = str(err["loc"][-1])
        close = difflib.get_close_matches(key, model_keys, n=1)
        return "is not a known key" + (f"; did you mean {close[0]!r}?" if close else "")
    ctx = dict(err.get("ctx") or {})
    if isinstance(err.get("input"), StackSecret):
        return (
            f"cannot be a Pulumi secret (only {', '.join(SECRET_KEYS)} can); set it in plain text with "
            "`pulumi config set` (no --secret)"
        )
    got = err.get("input")
    if isinstance(got, str) and len(got) > _SHOWN_CHARS:
        got = _Clipped(got)
    render = _MESSAGES.get(kind)
    if render is None:
        return f"{err['msg']} (got {got!r})"
    return render(got, ctx)


_SHOWN_CHARS = 60


class _Clipped(str):
    """A long value as a message shows it: its start and its length, not a quarter-megabyte line."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{str(self[:_SHOWN_CHARS])!r}... ({len(self):,} characters)"


def _problems(exc: ValidationError) -> list[Problem]:
    problems = []
    for err in exc.errors(include_url=False):
        loc = tuple(part for part in err["loc"] if part != "[key]")  # a bad mapping key: name the key itself
        error = (err.get("ctx") or {}).get("error")
        if isinstance(error, PathError):
            loc = (*loc, *error.loc) if error.relative else error.loc
        problems.append(Problem(format_path(loc), _message(err, _keys_at(loc))))
    return problems


def _keys_at(loc: tuple[str | int, ...]) -> list[str]:
    """The camelCase keys the model accepts next to ``loc``'s last element (for 'did you mean')."""
    model: Any = StackConfig
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        fields = getattr(model, "model_fields", {})
        field = next((f for n, f in fields.items() if (f.alias or n) == part), None)
        if field is None:
            return []
        model = _model_of(field.annotation)
    return [(f.alias or n) for n, f in getattr(model, "model_fields", {}).items()]


def _model_of(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _software_problems(raw: Mapping[str, Any]) -> list[Problem]:
    """``gb300:software`` names components of the pinned versions file, with version strings."""
    from gb300.facts.software import check_software_overrides  # noqa: PLC0415 - the bootstrap reads its data lazily

    software = raw.get("software")
    if not isinstance(software, Mapping):
        return []
    problems = []
    for path, message in check_software_overrides(software):
        full = format_path(tuple(path.split(".", 1)))
        # The message starts with the raw key; the path shows it escaped when it is not printable.
        problems.append(Problem(full, message.removeprefix(f"{NAMESPACE}:{path}: ")))
    return problems


def parse(raw: Mapping[str, Any]) -> StackConfig:
    """Validate the ``gb300`` namespace (keys without the ``gb300:`` prefix) into a :class:`StackConfig`."""
    raw = mask(raw)  # `{secure: ...}` -> StackSecret: no ciphertext reaches a message or the plan
    problems = _software_problems(raw)
    try:
        cfg = StackConfig.model_validate(dict(raw))
    except ValidationError as exc:
        found = _problems(exc)
        seen = {f.path for f in found}
        raise ConfigError(found + [p for p in problems if p.path not in seen]) from None
    problems += catalog_problems(cfg.software, cfg.slurm_setting_groups())
    if problems:
        raise ConfigError(problems)
    return cfg
