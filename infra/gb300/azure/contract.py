"""Check the ARM bodies gb300 writes itself against Azure's own SDK models, key by key.

Typed pulumi-azure-native classes check their inputs against the provider's schema. The bodies gb300 writes as
data (the dynamic compute resources of :mod:`gb300.compute_resource`, and any generic
``azure-native:resources:Resource``) are checked here against ``azure-mgmt-compute``'s models: the model
classes' REST field metadata (each field's JSON name and visibility) and their type annotations (nested models,
lists, maps and enums). Nothing is written by hand: a key the model does not define, a key Azure only reads,
a value outside a known enum, or a value of the wrong JSON type is a :class:`Violation` naming the full key
path. The models are one Compute API version (:func:`sdk_api_version`); a body declared for another version is
a violation too, since the check would not be about what Azure receives.
"""

from __future__ import annotations

import enum
import functools
import json
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gb300 import compute_resource
from gb300.azure.inventory import Resource

GENERIC = "azure-native:resources:Resource"
# A generic resource's namespace/type -> the SDK model of its body.
GENERIC_MODELS = {
    "microsoft.compute/virtualmachinescalesets": "VirtualMachineScaleSet",
    "microsoft.compute/virtualmachines": "VirtualMachine",
    "microsoft.compute/interconnectblocks": "InterconnectBlock",
}
_WRITABLE = {"create", "update"}


@dataclass(frozen=True)
class Violation:
    """One key of one body that Azure's models do not accept."""

    resource: str  # the Pulumi name
    urn: str
    path: str  # the full key path inside the ARM body, e.g. properties.virtualMachineProfile.osProfile
    problem: str

    def __str__(self) -> str:
        return f"{self.resource}: {self.path}: {self.problem}"


@functools.cache
def sdk_api_version() -> str:
    """The Compute API version of the installed ``azure-mgmt-compute`` models, read from its request builder."""
    from urllib.parse import parse_qs, urlparse  # noqa: PLC0415

    from azure.mgmt.compute.operations import _operations  # noqa: PLC0415

    request = _operations.build_virtual_machine_scale_sets_get_request(
        resource_group_name="rg", vm_scale_set_name="vmss", subscription_id="sub"
    )
    return parse_qs(urlparse(request.url).query)["api-version"][0]


@functools.cache
def _globals() -> dict[str, Any]:
    from azure.mgmt.compute import models  # noqa: PLC0415
    from azure.mgmt.compute.models import _models  # noqa: PLC0415

    return {**vars(_models), "_models": models}


def model(name: str) -> type:
    """An ``azure.mgmt.compute.models`` class by name."""
    from azure.mgmt.compute import models  # noqa: PLC0415

    cls: type = getattr(models, name)
    return cls


@functools.cache
def _fields(cls: type) -> dict[str, tuple[Any, list[str] | None]]:
    """JSON name -> (annotation, visibility) of a model class's REST fields."""
    cls({})  # the SDK computes a class's field table on first construction
    hints = typing.get_type_hints(cls, globalns=_globals())
    table: dict[str, Any] = getattr(cls, "_attr_to_rest_field")  # noqa: B009 - the SDK's own metadata
    return {rf._rest_name: (hints.get(attr), rf._visibility) for attr, rf in table.items()}


def _is_model(annotation: Any) -> bool:
    from azure.mgmt.compute._utils.model_base import Model  # noqa: PLC0415

    return isinstance(annotation, type) and issubclass(annotation, Model)


def _options(annotation: Any) -> list[Any]:
    """The alternatives of a Union/Optional annotation (without None), or the annotation itself."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(annotation) if a is not type(None)]
    return [annotation]


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return "null" if value is None else type(value).__name__


def _accepts(option: Any, value: Any) -> bool:  # noqa: PLR0911 - one answer per JSON type
    """Whether ``value``'s JSON type fits one alternative (structure only; enums and models checked after)."""
    origin = typing.get_origin(option)
    if _is_model(option) or origin is dict:
        return isinstance(value, Mapping)
    if origin is list:
        return isinstance(value, list)
    if isinstance(option, type) and issubclass(option, enum.Enum):
        return isinstance(value, str)
    if option is bool:
        return isinstance(value, bool)
    if option in (int, float):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if option is str:
        return isinstance(value, str)
    return True  # datetime, bytes, Any: what JSON carries them as is not checked


def _check(value: Any, annotation: Any, path: str) -> Iterator[tuple[str, str]]:
    if value is None or annotation is None:
        return
    options = [o for o in _options(annotation) if _accepts(o, value)]
    if not options:
        wanted = " or ".join(sorted({_describe(o) for o in _options(annotation)}))
        yield path, f"must be {wanted} (got {_json_type(value)})"
        return
    enums = [o for o in options if isinstance(o, type) and issubclass(o, enum.Enum)]
    if enums and len(enums) == len([o for o in _options(annotation) if o is not str]):
        known = {str(e.value).lower() for cls in enums for e in cls}
        if str(value).lower() not in known:
            names = ", ".join(sorted(str(e.value) for cls in enums for e in cls))
            yield path, f"{value!r} is not a value Azure's model knows ({enums[0].__name__}: {names})"
        return
    option = options[0]
    origin = typing.get_origin(option)
    if _is_model(option):
        yield from check_model(value, option, path)
    elif origin is list:
        (item,) = typing.get_args(option) or (None,)
        for i, element in enumerate(value):
            yield from _check(element, item, f"{path}[{i}]")
    elif origin is dict:
        _, item = typing.get_args(option) or (None, None)
        for key, element in value.items():
            yield from _check(element, item, f"{path}.{key}")


def _describe(option: Any) -> str:
    origin = typing.get_origin(option)
    if _is_model(option) or origin is dict:
        return "an object"
    if origin is list:
        return "an array"
    if option is bool:
        return "a boolean"
    if option in (int, float):
        return "a number"
    return "a string"


# Problems found per (model, body as JSON), for bodies up to this size: 1,388 racks' bodies differ only in a few
# names and tags, so their identical parts (network, storage, extension profiles) are checked once.
_CHECKED: dict[tuple[type, str], tuple[tuple[str, str], ...]] = {}
_CHECKED_MAX_BYTES = 8192


def check_model(data: Mapping[str, Any], cls: type, path: str = "") -> Iterator[tuple[str, str]]:
    """(key path, problem) for every key of ``data`` that model ``cls`` does not accept in a request."""
    try:
        text: str | None = json.dumps(data, sort_keys=True)
    except (TypeError, ValueError):  # not JSON (an unresolved value): checked, never remembered
        text = None
    key = (cls, text) if text is not None and len(text) <= _CHECKED_MAX_BYTES else None
    found = _CHECKED.get(key) if key is not None else None
    if found is None:
        found = tuple(_check_fields(data, cls))
        if key is not None:
            _CHECKED[key] = found
    for where, problem in found:
        yield (f"{path}.{where}" if path else where), problem


def _check_fields(data: Mapping[str, Any], cls: type) -> Iterator[tuple[str, str]]:
    """:func:`check_model` at the top of ``data``: key paths relative to it."""
    fields = _fields(cls)
    for key, value in data.items():
        if key not in fields:
            yield key, f"unknown key: {cls.__name__} defines no {key!r}"
            continue
        annotation, visibility = fields[key]
        if visibility is not None and not _WRITABLE & set(visibility):
            yield key, f"read-only key: Azure sets {cls.__name__}.{key} and ignores it in a request"
            continue
        yield from _check(value, annotation, key)


def body_of(resource: Resource) -> tuple[str, Mapping[str, Any], str | None] | None:
    """(model name, ARM body, declared API version) of a resource gb300 declares as data, else None."""
    inputs = resource.inputs
    if resource.type == compute_resource.DYNAMIC_TYPE:
        kind = compute_resource.KINDS.get(str(inputs.get(compute_resource.MARKER)))
        if kind is None:
            return None
        return kind.model, compute_resource.body(inputs), _text(inputs.get("apiVersion"))
    if resource.type == GENERIC:
        arm_type = f"{inputs.get('resourceProviderNamespace', '')}/{inputs.get('resourceType', '')}".lower()
        name = GENERIC_MODELS.get(arm_type)
        if name is None:
            return "", {}, arm_type
        keys = ("location", "zones", "sku", "identity", "plan", "placement", "properties", "tags")
        return name, {k: inputs[k] for k in keys if k in inputs}, _text(inputs.get("apiVersion"))
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def violations(resources: Iterable[Resource]) -> list[Violation]:
    """Every key of every data-declared ARM body that Azure's SDK models refuse."""
    out: list[Violation] = []
    version = sdk_api_version()
    for resource in resources:
        found = body_of(resource)
        if found is None:
            continue
        name, body, declared = found
        if not name:
            out.append(
                Violation(resource.name, resource.urn, "resourceType", f"no azure-mgmt-compute model for {declared}")
            )
            continue
        if declared != version:
            out.append(
                Violation(
                    resource.name,
                    resource.urn,
                    "apiVersion",
                    f"must be {version}, the Compute API version of the installed azure-mgmt-compute models the "
                    f"body is checked against (got {declared})",
                )
            )
        out.extend(Violation(resource.name, resource.urn, p, problem) for p, problem in check_model(body, model(name)))
    return out
