"""Hold the compute package's constants and the racks' inputs to the real azure-native plugin's schema.

``pulumi package get-schema azure-native@<version> compute v20260301`` asks the azure-native plugin of the version
``constraints.txt`` pins to parameterize itself and print the package's schema. The CI job
``compute-package`` (``.github/workflows/pr.yml``) runs it where a Pulumi CLI is installed and then
``scripts/check-compute-package``, which calls :func:`problems`: the schema must name the package, base provider
and parameter :mod:`gb300.components.compute_package` pins, define the scale set token, and define every input key
path the plan gives each rack (nested objects through their ``$ref`` types, arrays through ``items``, maps through
``additionalProperties``; a ``pulumi.json#/Any`` value ends the walk). Here, without a Pulumi CLI, the tests drive
it with schema fragments shaped as Pulumi's package schema (``pkg/codegen/schema``).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from gb300.azure.inventory import mapping
from gb300.components import compute_package


def _type(schema: Mapping[str, Any], spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object type a property spec refers to (``$ref: #/types/<token>``), or an empty mapping."""
    ref = spec.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/types/"):
        return mapping(mapping(schema.get("types")).get(ref.removeprefix("#/types/")))
    return {}


def _walk(schema: Mapping[str, Any], value: Any, spec: Mapping[str, Any], path: str) -> Iterator[str]:
    if spec.get("$ref") == "pulumi.json#/Any" or not spec:
        return
    if isinstance(value, Mapping):
        if "additionalProperties" in spec:
            for key, item in value.items():
                yield from _walk(schema, item, mapping(spec["additionalProperties"]), f"{path}.{key}")
            return
        properties = mapping(_type(schema, spec).get("properties") or spec.get("properties"))
        for key, item in value.items():
            if key not in properties:
                yield f"{path}.{key}: the schema defines no such input"
            else:
                yield from _walk(schema, item, mapping(properties[key]), f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(schema, item, mapping(spec.get("items")), f"{path}[{i}]")


def problems(schema: Mapping[str, Any], resources: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every disagreement between the plugin's ``schema`` and gb300's constants or the planned ``resources``
    (plan JSON records: ``type``, ``name``, ``inputs``)."""
    out: list[str] = []
    expected_parameter = base64.b64encode(compute_package.PARAMETER.encode()).decode()
    param = mapping(schema.get("parameterization"))
    base = mapping(param.get("baseProvider"))
    pins = {
        "name": (schema.get("name"), compute_package.PACKAGE_NAME),
        "version": (schema.get("version"), compute_package.PACKAGE_VERSION),
        "parameterization.baseProvider.name": (base.get("name"), compute_package.BASE_PROVIDER),
        "parameterization.baseProvider.version": (base.get("version"), compute_package.BASE_PROVIDER_VERSION),
        "parameterization.parameter": (param.get("parameter"), expected_parameter),
    }
    out += [f"schema {key}: {got!r}, gb300 pins {want!r}" for key, (got, want) in pins.items() if got != want]
    resources_schema = mapping(schema.get("resources"))
    token = compute_package.SCALE_SET_TOKEN
    if token not in resources_schema:
        return [*out, f"schema defines no {token}"]
    inputs_spec = mapping(resources_schema[token].get("inputProperties"))
    checked = 0
    for record in resources:
        if record.get("type") != token:
            continue
        checked += 1
        for key, value in mapping(record.get("inputs")).items():
            where = f"{record.get('name')}: {key}"
            if key not in inputs_spec:
                out.append(f"{where}: the schema defines no such input")
            else:
                out.extend(_walk(schema, value, mapping(inputs_spec[key]), where))
    if not checked:
        out.append(f"the plan has no {token} to check")
    return out
