"""Check the ARM bodies gb300 writes itself against Azure's own SDK models, key by key.

Typed pulumi-azure-native classes check their inputs against the provider's schema. The compute bodies gb300
writes as data (the scale sets of azure-native's compute 2026-03-01 package, :mod:`gb300.components.compute_package`,
whose ARM body :func:`arm_body` rebuilds from the flattened inputs, and any generic
``azure-native:resources:Resource``) are checked here against ``azure-mgmt-compute``'s models: the model
classes' REST field metadata (each field's JSON name and visibility) and their type annotations (nested models,
lists, maps and enums). Nothing is written by hand: a key the model does not define, a key Azure only reads,
a value outside a known enum, or a value of the wrong JSON type is a :class:`Violation` naming the full key
path. The models are one Compute API version (:func:`sdk_api_version`); a body declared for another version is
a violation too, since the check would not be about what Azure receives, unless ``data/skus.yaml`` names the
models' version as the stand-in for it (``contractModels``, with the differences between the two versions).
"""

from __future__ import annotations

import enum
import functools
import marshal
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gb300.azure.inventory import mapping
from gb300.components import compute_package
from gb300.facts import catalog
from gb300.resources import UNKNOWN, Resource

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
def _fields(cls: type) -> dict[str, tuple[Any, bool]]:
    """JSON name -> (annotation, whether a request may set it) of a model class's REST fields."""
    cls({})  # the SDK computes a class's field table on first construction
    hints = typing.get_type_hints(cls, globalns=_globals())
    table: dict[str, Any] = getattr(cls, "_attr_to_rest_field")  # noqa: B009 - the SDK's own metadata
    return {
        rf._rest_name: (hints.get(attr), rf._visibility is None or bool(_WRITABLE & set(rf._visibility)))
        for attr, rf in table.items()
    }


def _is_model(annotation: Any) -> bool:
    from azure.mgmt.compute._utils.model_base import Model  # noqa: PLC0415

    return isinstance(annotation, type) and issubclass(annotation, Model)


def _options(annotation: Any) -> list[Any]:
    """The alternatives of a Union/Optional annotation (without None), or the annotation itself."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(annotation) if a is not type(None)]
    return [annotation]


def _json_type(value: Any) -> str:
    if isinstance(value, str):  # the common leaf first: names, ids, tags
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict | Mapping):
        return "object"
    return "null" if value is None else type(value).__name__


def _accepts(option: Any, json_type: str) -> bool:  # noqa: PLR0911 - one answer per JSON type
    """Whether a value of ``json_type`` fits one alternative (structure only; enums and models checked after)."""
    origin = typing.get_origin(option)
    if _is_model(option) or origin is dict:
        return json_type == "object"
    if origin is list:
        return json_type == "array"
    if isinstance(option, type) and issubclass(option, enum.Enum):
        return json_type == "string"
    if option is bool:
        return json_type == "boolean"
    if option in (int, float):
        return json_type == "number"
    if option is str:
        return json_type == "string"
    return True  # datetime, bytes, Any: what JSON carries them as is not checked


@dataclass(frozen=True)
class _Expected:
    """What an annotation asks of a value of one JSON type, worked out once per pair: to be of another type
    (``wanted``), to be one of an enum's values, or to pass a nested model, list or map check."""

    wanted: str | None = None  # "an object or a string": the value's type fits no alternative
    enum_values: frozenset[str] | None = None  # lowercase; set when only enums take the value
    enum_names: str = ""  # "OrchestrationMode: Flexible, Uniform"
    model: type | None = None
    items: Any = None  # the annotation of a list's elements or a map's values
    container: type | None = None  # list or dict
    any_string_item: bool = False  # the items' annotation takes every string as it is (tags, names)


@functools.cache
def _expect(annotation: Any, json_type: str) -> _Expected:
    alternatives = _options(annotation)
    options = [o for o in alternatives if _accepts(o, json_type)]
    if not options:
        return _Expected(wanted=" or ".join(sorted({_describe(o) for o in alternatives})))
    enums = [o for o in options if isinstance(o, type) and issubclass(o, enum.Enum)]
    if enums and len(enums) == len([o for o in alternatives if o is not str]):
        return _Expected(
            enum_values=frozenset(str(e.value).lower() for cls in enums for e in cls),
            enum_names=f"{enums[0].__name__}: " + ", ".join(sorted(str(e.value) for cls in enums for e in cls)),
        )
    option = options[0]
    origin = typing.get_origin(option)
    if _is_model(option):
        return _Expected(model=option)
    if origin is list:
        (item,) = typing.get_args(option) or (None,)
        return _Expected(items=item, container=list, any_string_item=_takes_any_string(item))
    if origin is dict:
        _, item = typing.get_args(option) or (None, None)
        return _Expected(items=item, container=dict, any_string_item=_takes_any_string(item))
    return _Expected()


def _takes_any_string(annotation: Any) -> bool:
    return _expect(annotation, "string") == _Expected()


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


def _exact(value: Any) -> bytes | None:
    """``value`` as bytes that tell every type apart (``True`` from ``1``, ``1`` from ``1.0``, a list from a
    tuple): :mod:`marshal`'s version 2, which has no back-references, so equal values of equal types always give
    equal bytes (bytes and bytearray, which JSON does not carry, read alike). None for a value marshal cannot
    write (an unresolved value, a custom mapping)."""
    try:
        return marshal.dumps(value, 2)
    except ValueError:
        return None


# Where a sub-body holds strings the check takes as they are (names, ids, tag values): key or index -> the
# places below it, None for the string itself. Enum values and everything else the check reads are not there.
_Loose = dict[str | int, "_Loose | None"]


def _restore(new: Any, old: Any, loose: _Loose | None) -> Any:
    """``new`` with the strings at ``loose`` places that differ from ``old`` taken from ``old`` (copies, where
    they differ; ``new`` itself is left alone)."""
    if loose is None:
        return old if isinstance(new, str) else new
    if isinstance(new, dict) and isinstance(old, dict):
        changed = {
            k: _restore(new[k], old[k], below)
            for k, below in loose.items()
            if k in new and k in old and new[k] != old[k]
        }
        return {**new, **changed} if changed else new
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        out = list(new)
        for i, below in loose.items():
            if isinstance(i, int) and out[i] != old[i]:
                out[i] = _restore(out[i], old[i], below)
        return out
    return new


class _Seen:
    """The last sub-body checked at one key path against one model: what was found, and its loose strings."""

    def __init__(self, data: Mapping[str, Any], found: list[tuple[str, str]], loose: _Loose) -> None:
        self.data = data
        self.found = found
        self.loose = loose
        self._bytes: bytes | None = None

    def matches(self, data: Mapping[str, Any]) -> bool:
        """``data`` differs from the last sub-body at most in its loose strings: with them put back, it is the
        same value, types included. Then the check would find the same, as it takes any string there."""
        if self._bytes is None:
            self._bytes = _exact(self.data)
        return self._bytes is not None and _exact(_restore(data, self.data, self.loose)) == self._bytes


class _Checker:
    """The checks of one :func:`violations` call.

    The racks of a pool write the same body but for a few names and tags, so at each key path the model check
    remembers the last sub-body it checked: a body that differs from it only in strings the check takes as they
    are (a name, a tag value) gets the same problems without a second walk; any other difference (a key, a
    type, an enum value) is checked again, key by key.
    """

    def __init__(self) -> None:
        self._last: dict[tuple[type, str], _Seen] = {}

    def model(self, data: Mapping[str, Any], cls: type, path: str) -> _Seen:
        """The check of ``data`` at ``path`` against model ``cls``: (key path, problem) for every key it refuses
        (``found``), and its loose strings."""
        last = self._last.get((cls, path))
        if last is not None and last.matches(data):
            return last
        loose: _Loose = {}
        found = list(self._fields(data, cls, path, loose))
        seen = self._last[cls, path] = _Seen(data, found, loose)
        return seen

    def _fields(self, data: Mapping[str, Any], cls: type, path: str, loose: _Loose) -> Iterator[tuple[str, str]]:
        fields = _fields(cls)
        for key, value in data.items():
            where = f"{path}.{key}" if path else key
            if key not in fields:
                yield where, f"unknown key: {cls.__name__} defines no {key!r}"
                continue
            annotation, writable = fields[key]
            if not writable:
                yield where, f"read-only key: Azure sets {cls.__name__}.{key} and ignores it in a request"
                continue
            yield from self._value(value, annotation, where, loose, key)

    def _value(
        self, value: Any, annotation: Any, path: str, loose: _Loose, step: str | int
    ) -> Iterator[tuple[str, str]]:
        """Problems of ``value`` (``step`` of its parent), noting in ``loose`` the strings taken as they are. A value a
        preview cannot know yet (:data:`~gb300.resources.UNKNOWN`, as the policy pack passes it) is not checked."""
        if value is None or value == UNKNOWN:
            return
        json_type = _json_type(value)
        expected = _expect(annotation, json_type)
        if expected.wanted is not None:
            yield path, f"must be {expected.wanted} (got {json_type})"
        elif expected.enum_values is not None:
            if str(value).lower() not in expected.enum_values:
                yield path, f"{value!r} is not a value Azure's model knows ({expected.enum_names})"
        elif expected.model is not None:
            seen = self.model(value, expected.model, path)
            if seen.loose:
                loose[step] = seen.loose
            yield from seen.found
        elif expected.container is not None:
            below: _Loose = {}
            elements = enumerate(value) if expected.container is list else value.items()
            for key, element in elements:
                if expected.any_string_item and isinstance(element, str):
                    below[key] = None
                else:
                    where = f"{path}[{key}]" if expected.container is list else f"{path}.{key}"
                    yield from self._value(element, expected.items, where, below, key)
            if below:
                loose[step] = below
        elif json_type == "string":
            loose[step] = None


# The package's inputs that address the resource (path and query of the request), not its body.
_ADDRESS_INPUTS = frozenset(
    {"resourceGroupName", "vmScaleSetName", "interconnectBlockName", "vmName", "vmExtensionName"}
)
TYPED_MODELS = {"azure-native:compute:VirtualMachineExtension": "VirtualMachineExtension"}
"""Typed azure-native compute resources held to the same models (:func:`typed_violations`): the VM extensions (the Entra
sign-in extension and the monitoring agent). Not the typed VMs: azure-mgmt-compute's ``VirtualMachineSizeTypes`` is a
list of old sizes that names no v5 size, and Azure takes any size string there."""
_TOP_LEVEL = ("location", "zones", "sku", "identity", "plan", "placement", "tags", "extendedLocation")
PACKAGE_MODELS = {
    compute_package.SCALE_SET_TOKEN: "VirtualMachineScaleSet",
}


def _annotation(cls: type, key: str) -> Any:
    """The annotation of a model's field ``key`` (its JSON name), None for a key the model does not define."""
    return _fields(cls).get(key, (None, False))[0]


@functools.cache
def _properties_model(cls: type) -> type | None:
    """The model of a model's ``properties`` envelope, None when it has none."""
    return next((o for o in _options(_annotation(cls, "properties")) if _is_model(o)), None)


@functools.cache
def _flattened(cls: type) -> frozenset[str]:
    """JSON names of the fields a model carries in its ``properties`` envelope, which azure-native flattens into
    its parent (the SDK marks them: ``__flattened_items``, from the REST specification's x-ms-client-flatten)."""
    attrs: list[str] = getattr(cls, f"_{cls.__name__}__flattened_items", None) or []
    inner = _properties_model(cls) if attrs else None
    if inner is None:
        return frozenset()
    _fields(inner)  # builds the class's field table
    table: dict[str, Any] = getattr(inner, "_attr_to_rest_field")  # noqa: B009 - the SDK's own metadata
    return frozenset(table[a]._rest_name for a in attrs if a in table)


def _unflatten(value: Any, annotation: Any) -> Any:
    """``value`` with azure-native's flattening undone wherever ``annotation`` (a model, list or map) flattens."""
    if isinstance(value, Mapping):
        expected = _expect(annotation, "object")
        if expected.model is not None:
            return unflatten(value, expected.model)
        if expected.container is dict:
            return {k: _unflatten(v, expected.items) for k, v in value.items()}
        return value
    if isinstance(value, list):
        expected = _expect(annotation, "array")
        return [_unflatten(v, expected.items) for v in value] if expected.container is list else value
    return value


def unflatten(data: Mapping[str, Any], cls: type) -> dict[str, Any]:
    """The ARM body of model ``cls`` from azure-native's flattened inputs: the keys the model carries in its
    ``properties`` envelope go back under ``properties``, at every level."""
    flat = _flattened(cls)
    properties_model = _properties_model(cls)
    out: dict[str, Any] = {}
    inner: dict[str, Any] = {}
    for key, value in data.items():
        if key in flat and properties_model is not None:
            inner[key] = _unflatten(value, _annotation(properties_model, key))
        else:
            out[key] = _unflatten(value, _annotation(cls, key))
    if inner:
        out["properties"] = {**mapping(out.get("properties")), **inner}
    return out


def arm_body(resource: Resource, name: str | None = None) -> tuple[str, dict[str, Any]]:
    """(model name, ARM body) of a resource of azure-native's compute package, rebuilt from its inputs: the
    addressing inputs dropped, the top level's flattened ``properties`` and every nested envelope restored, and a
    user-assigned identity list written as ARM's map."""
    name = name or PACKAGE_MODELS[resource.type]
    inputs = {k: v for k, v in resource.inputs.items() if k not in _ADDRESS_INPUTS and v is not None}
    top = {k: inputs.pop(k) for k in _TOP_LEVEL if k in inputs}
    cls = model(name)
    properties_model = _properties_model(cls)
    assert properties_model is not None  # noqa: S101 - every model of PACKAGE_MODELS has a properties envelope
    body: dict[str, Any] = {k: _unflatten(v, _annotation(cls, k)) for k, v in top.items()}
    identity = mapping(body.get("identity"))
    ids = identity.get("userAssignedIdentities")
    if isinstance(ids, list):
        body["identity"] = {**identity, "userAssignedIdentities": {str(i): {} for i in ids}}
    if inputs:
        body["properties"] = unflatten(inputs, properties_model)
    return name, body


def body_of(resource: Resource) -> tuple[str, Mapping[str, Any], str | None] | None:
    """(model name, ARM body, declared API version) of a resource gb300 declares as data, else None."""
    inputs = resource.inputs
    if resource.type in PACKAGE_MODELS:
        model_name, body = arm_body(resource)
        return model_name, body, compute_package.API_VERSION
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
    checker = _Checker()
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
        if declared != version and catalog.load().contract_models.get(declared or "") != version:
            out.append(
                Violation(
                    resource.name,
                    resource.urn,
                    "apiVersion",
                    f"must be {version}, the Compute API version of the installed azure-mgmt-compute models the "
                    f"body is checked against, or a version data/skus.yaml contractModels lets those models stand "
                    f"in for (got {declared})",
                )
            )
        problems = checker.model(body, model(name), "").found
        out.extend(Violation(resource.name, resource.urn, path, problem) for path, problem in problems)
    return out


def typed_violations(resources: Iterable[Resource]) -> list[Violation]:
    """Every key of a typed VM extension's body, rebuilt from its inputs as for the racks, that Azure's SDK
    models refuse (the provider checked the inputs against its schema; this holds them to Azure's own models)."""
    out: list[Violation] = []
    checker = _Checker()
    for resource in resources:
        name = TYPED_MODELS.get(resource.type)
        if name is None:
            continue
        _, body = arm_body(resource, name)
        problems = checker.model(body, model(name), "").found
        out.extend(Violation(resource.name, resource.urn, path, problem) for path, problem in problems)
    return out
