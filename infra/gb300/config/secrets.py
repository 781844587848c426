"""Pulumi secrets in a stack file, as ``gb300 plan`` sees them: present, never readable.

``pulumi config set --secret`` writes ``{secure: v1:...}`` where the value was, and the Pulumi engine decrypts it
before a program runs (``pulumi up``/``preview`` hand the program plain text through ``pulumi.Config``). The
offline plan reads the file itself and has no key, so each such mapping becomes one :class:`StackSecret` before
validation: its ciphertext is dropped there, so no message, plan text or plan JSON can show it. A key that may
hold a secret types itself ``str | StackSecret`` (:data:`SECRET_KEYS` lists them for messages and docs); any
other key refuses one with a message naming the key. Components receive every value of such a key as a Pulumi
secret (:func:`as_secret_input`); offline, a :class:`StackSecret` becomes :data:`OFFLINE_PLACEHOLDER`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

if TYPE_CHECKING:
    import pulumi

# The keys whose values may be Pulumi secrets (webhook URLs carry their receiver's token).
SECRET_KEYS: tuple[str, ...] = ("gb300:monitoring.alerts.webhooks[]",)
# What a component receives offline in place of a secret the plan cannot decrypt: a well-formed, inert URL
# (RFC 6761 reserves .invalid), recorded in the plan as "[secret]" like every secret input.
OFFLINE_PLACEHOLDER = "https://encrypted.invalid/gb300-plan-cannot-decrypt"


class StackSecret:
    """A ``{secure: ...}`` value of a stack file: known to be there, its value unknown to the offline plan."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<a Pulumi secret>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StackSecret)

    def __hash__(self) -> int:
        return hash(StackSecret)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        del source, handler
        return core_schema.is_instance_schema(cls)

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        del schema, handler
        # patternProperties, not properties: `secure` is Pulumi's envelope, not a gb300 key to document.
        return {
            "type": "object",
            "description": "A Pulumi secret, as `pulumi config set --secret` writes it: {secure: <ciphertext>}",
            "patternProperties": {"^secure$": {"type": "string"}},
            "required": ["secure"],
            "additionalProperties": False,
        }


def _is_secure(value: object) -> bool:
    return isinstance(value, Mapping) and list(value) == ["secure"] and isinstance(value["secure"], str)


def mask(raw: Any) -> Any:
    """``raw`` with every ``{secure: <ciphertext>}`` mapping replaced by a :class:`StackSecret` (copies; the
    input is not changed)."""
    if _is_secure(raw):
        return StackSecret()
    if isinstance(raw, Mapping):
        return {key: mask(value) for key, value in raw.items()}
    if isinstance(raw, list):
        return [mask(value) for value in raw]
    return raw


def has_secret(value: Any) -> bool:
    """Whether a parsed value (a model, list or mapping) holds a :class:`StackSecret` anywhere."""
    if isinstance(value, StackSecret):
        return True
    if isinstance(value, Mapping):
        return any(has_secret(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(has_secret(v) for v in value)
    fields = getattr(type(value), "model_fields", None)
    if fields:
        return any(has_secret(getattr(value, name)) for name in fields)
    return False


def as_secret_input(value: str | StackSecret) -> pulumi.Output[str]:
    """What a component receives for a value of a secret-capable key: always a Pulumi secret; offline, in place
    of a value the plan cannot decrypt, :data:`OFFLINE_PLACEHOLDER`."""
    import pulumi  # noqa: PLC0415 - the config layer is read without the Pulumi SDK (gb300 schema, docs)

    return pulumi.Output.secret(OFFLINE_PLACEHOLDER if isinstance(value, StackSecret) else value)
