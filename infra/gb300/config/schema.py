"""The JSON Schema of a stack file's ``config:`` block (``gb300 schema``) and the key paths it documents."""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import GenerateJsonSchema, NoDefault
from pydantic_core import core_schema

from gb300.config.checks import (
    NAMESPACE,
)
from gb300.config.models import StackConfig


class _SchemaWithAllDefaults(GenerateJsonSchema):
    """Pydantic's schema generator, also stating the defaults that come from a ``default_factory`` (``[]``, ``{}``)."""

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if factory is not None and not schema.get("default_factory_takes_data"):
            return factory()  # type: ignore[call-arg]
        return schema.get("default", NoDefault)


def _one_line_descriptions(node: Any) -> None:
    """Field docstrings wrap like code; a schema description is one line of text."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "description" and isinstance(value, str):
                node[key] = " ".join(value.split())
            else:
                _one_line_descriptions(value)
    elif isinstance(node, list):
        for item in node:
            _one_line_descriptions(item)


def json_schema() -> dict[str, Any]:
    """A JSON Schema of a stack file's ``config:`` block, for editors (``gb300 schema``)."""
    inner = StackConfig.model_json_schema(
        by_alias=True, ref_template="#/$defs/{model}", schema_generator=_SchemaWithAllDefaults
    )
    _one_line_descriptions(inner)
    defs = inner.pop("$defs", {})
    props = {f"{NAMESPACE}:{k}": v for k, v in inner["properties"].items()}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "gb300 stack file",
        "description": "A Pulumi stack file (stacks/Pulumi.<stack>.yaml) for the gb300 project.",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "properties": props,
                "required": [f"{NAMESPACE}:{k}" for k in inner.get("required", [])],
                "patternProperties": {"^(?!gb300:)[^:]+:.+$": {}},
                "additionalProperties": False,
            },
            "secretsprovider": {"type": "string"},
            "encryptedkey": {"type": "string"},
            "encryptionsalt": {"type": "string"},
            "environment": {},
        },
        "required": ["config"],
        "$defs": defs,
    }


def key_paths() -> list[str]:
    """Every documented key path of the namespace (``gb300:gpuPools[].racks``), from the JSON Schema."""
    schema = json_schema()
    defs: dict[str, Any] = schema["$defs"]
    out: list[str] = []

    def walk(node: dict[str, Any], path: str) -> None:
        if "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        for sub in node.get("anyOf", []):
            walk(sub, path)
        if node.get("type") == "array" and isinstance(node.get("items"), dict):
            walk(node["items"], path + "[]")
        for name, sub in node.get("properties", {}).items():
            out.append(f"{path}.{name}")
            walk(sub, f"{path}.{name}")

    for key, node in schema["properties"]["config"]["properties"].items():
        out.append(key)
        walk(node, key)
    return out
