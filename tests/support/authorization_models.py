"""Role assignments held to Azure's own models (azure-mgmt-authorization, a test dependency), key by key.

pulumi-azure-native's ``authorization.RoleAssignment`` sends a PUT to
``{scope}/providers/Microsoft.Authorization/roleAssignments/{roleAssignmentName}`` with every other input under
``properties``, at the API version its docstring names ("Uses Azure REST API version ..."). :func:`violations`
rebuilds that body (:func:`tests.support.arm.arm_body`) and checks it against
``RoleAssignmentCreateParameters`` of the same API version of azure-mgmt-authorization: each key one the model
defines and a request may set, each value of the model's type, ``principalType`` one of its ``PrincipalType``
values, the required keys present. Like :mod:`gb300.azure.contract`'s check, a value a preview cannot know yet
(:data:`gb300.resources.UNKNOWN`) is not checked.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from gb300.resources import UNKNOWN, Resource
from tests.support.arm import arm_body

ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"
PATH_KEYS = ("roleAssignmentName", "scope")
"""The inputs that name the assignment in the request's URL, not its body."""
MODEL = "RoleAssignmentCreateParameters"


@functools.cache
def api_version() -> str:
    """The Authorization API version the installed pulumi-azure-native's RoleAssignment uses (its docstring)."""
    from pulumi_azure_native.authorization import role_assignment  # noqa: PLC0415

    text = Path(role_assignment.__file__).read_text()
    found = re.search(r"Uses Azure REST API version (\d{4}-\d{2}-\d{2}(?:-preview)?)\.", text)
    if found is None:
        raise RuntimeError(f"{role_assignment.__file__} names no REST API version")
    return found.group(1)


@functools.cache
def models() -> ModuleType:
    """azure-mgmt-authorization's models of :func:`api_version` (ImportError: the SDK has no such version)."""
    return importlib.import_module(f"azure.mgmt.authorization.v{api_version().replace('-', '_')}.models")


def _problems(body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    cls = getattr(models(), MODEL)
    fields = {spec["key"]: (attr, spec["type"]) for attr, spec in cls._attribute_map.items()}
    rules: dict[str, dict[str, bool]] = cls._validation
    principal_types = {p.value for p in models().PrincipalType}
    flat = {f"properties.{k}": v for k, v in body["properties"].items()}
    for path, value in flat.items():
        if path not in fields:
            yield path, f"unknown key: {MODEL} defines no {path.split('.', 1)[1]!r}"
            continue
        attr, kind = fields[path]
        if rules.get(attr, {}).get("readonly"):
            yield path, f"read-only key: Azure sets {MODEL}.{attr} and ignores it in a request"
        elif value is None or value == UNKNOWN:
            continue
        elif kind == "str" and not isinstance(value, str):
            yield path, f"must be a string (got {type(value).__name__})"
        elif attr == "principal_type" and value not in principal_types:
            yield path, f"{value!r} is not a value Azure's model knows ({', '.join(sorted(principal_types))})"
    for attr, rule in rules.items():
        key = cls._attribute_map[attr]["key"]
        if rule.get("required") and key not in flat:
            yield key, f"required by {MODEL} and missing"


def violations(resources: Iterable[Resource]) -> list[str]:
    """``<name>: <key path>: <problem>`` for every key of every role assignment's body the models refuse."""
    out: list[str] = []
    for resource in resources:
        if resource.type != ROLE_ASSIGNMENT:
            continue
        body = arm_body(resource.inputs, PATH_KEYS)
        out.extend(f"{resource.name}: {path}: {problem}" for path, problem in _problems(body))
    return out
