"""Compute resources that pulumi-azure-native cannot declare, as Pulumi dynamic resources on ``azure-mgmt-compute``.

GPU scale sets need a top-level ``zones``, ``networkProfile.interconnectGroupProfile`` and
``interconnectBlockProfile``; interconnect blocks (``Microsoft.Compute/interconnectBlocks``) are a resource type
of their own. pulumi-azure-native 3.29 types the scale set at Compute API 2024-11-01 (none of these fields),
its generic ``resources:Resource`` has no ``zones`` input, and it has no interconnect block at all. Each such
resource is therefore a ``pulumi.dynamic.Resource`` whose provider (:class:`ComputeProvider`) drives Azure's own
SDK client (``azure.mgmt.compute.ComputeManagementClient``): create and update are the SDK's
``begin_create_or_update`` (a PUT of the whole body, waited for), delete is ``begin_delete`` (waited for), and
:meth:`ComputeProvider.diff` asks for a replacement where Azure cannot change a property in place. Why not an
ARM deployment or a deployment stack: see ``docs/fabric.md``.

The inputs (and the outputs, which repeat them and add ``id``) are::

    gb300Kind          "rack-scale-set" | "pool-scale-set" | "interconnect-block"   (the marker)
    resourceType       "Microsoft.Compute/virtualMachineScaleSets" | "Microsoft.Compute/interconnectBlocks"
    apiVersion         the Compute API version the body is written for
    subscriptionId, resourceGroupName, resourceName
    location, zones, sku, identity, placement, properties, tags    (the ARM body, camelCase, as Azure receives it)

The provider is pickled by reference (this module is importable from the installed ``gb300`` package), so the
``__provider`` input each resource carries is about a hundred bytes and does not change between runs; it is
pickled once per process (:func:`serialized_provider`). Because the pickle names this module, it stays at
``gb300.compute_resource`` (at the package root, not in :mod:`gb300.azure` with its readers): moving or renaming it
would change the ``__provider`` input of every deployed rack scale set and interconnect block, and ``pulumi up``
would show them all as changed.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi.dynamic

# pulumi.dynamic's serialize_provider (pulumi 3.x, dynamic.py) wraps ``pickle._Pickler._batch_setitems`` in a new
# sorting wrapper on every call and never restores it: each dynamic resource adds one stack frame to every later
# pickle, and a process that registers a few thousand of them (a 1,389-rack pool, or a test session planning the
# reference stack many times) ends in RecursionError. :func:`serialized_provider` calls it once per process and
# puts the original back before and after.
_PICKLER_BATCH_SETITEMS = pickle._Pickler._batch_setitems  # type: ignore[attr-defined]

MARKER = "gb300Kind"
RACK_SCALE_SET = "rack-scale-set"
POOL_SCALE_SET = "pool-scale-set"
INTERCONNECT_BLOCK = "interconnect-block"
DYNAMIC_TYPE = "pulumi-python:dynamic:Resource"  # the type token every pulumi.dynamic.Resource registers
# The keys of the ARM body, in the order Azure's documentation writes them; everything else is addressing.
BODY_KEYS = ("location", "zones", "sku", "identity", "placement", "properties", "tags")
ADDRESS_KEYS = (MARKER, "resourceType", "apiVersion", "subscriptionId", "resourceGroupName", "resourceName")

Path = tuple[str, ...]


@dataclass(frozen=True)
class Kind:
    """How one kind of resource maps onto the SDK: its ARM type, model class, client operations and the
    properties Azure cannot change in place (a change to one of them replaces the resource)."""

    resource_type: str
    model: str  # class name in azure.mgmt.compute.models
    operations: str  # attribute of ComputeManagementClient
    name_argument: str  # keyword naming the resource in the operations' methods
    replace_on: tuple[Path, ...]


# Replacements, from the SDK models' documentation and Azure's scale set FAQ: a scale set's zones, orchestration
# mode, fault domain count and placement-group setting are fixed at creation; a GB rack's VM size and fabric
# (interconnect group and block) define the rack, so a change is a new rack rather than a resize in place.
# An interconnect block's sku.name, zones, placement and interconnect group are immutable (only sku.capacity
# and tags may change: InterconnectBlockUpdate).
_COMMON: tuple[Path, ...] = (
    ("subscriptionId",),
    ("resourceGroupName",),
    ("resourceName",),
    ("resourceType",),
    ("location",),
    ("zones",),
)
_SCALE_SET = Kind(
    resource_type="Microsoft.Compute/virtualMachineScaleSets",
    model="VirtualMachineScaleSet",
    operations="virtual_machine_scale_sets",
    name_argument="vm_scale_set_name",
    replace_on=(
        *_COMMON,
        ("sku", "name"),
        ("properties", "orchestrationMode"),
        ("properties", "platformFaultDomainCount"),
        ("properties", "singlePlacementGroup"),
        ("properties", "virtualMachineProfile", "networkProfile", "interconnectGroupProfile"),
        ("properties", "virtualMachineProfile", "interconnectBlockProfile"),
    ),
)
KINDS: dict[str, Kind] = {
    RACK_SCALE_SET: _SCALE_SET,
    POOL_SCALE_SET: _SCALE_SET,
    INTERCONNECT_BLOCK: Kind(
        resource_type="Microsoft.Compute/interconnectBlocks",
        model="InterconnectBlock",
        operations="interconnect_blocks",
        name_argument="interconnect_block_name",
        replace_on=(*_COMMON, ("sku", "name"), ("placement",), ("properties", "interconnectGroup")),
    ),
}


def arm_id(inputs: Mapping[str, Any]) -> str:
    """The Azure resource id of a resource with these inputs."""
    return (
        f"/subscriptions/{inputs['subscriptionId']}/resourceGroups/{inputs['resourceGroupName']}/providers/"
        f"{inputs['resourceType']}/{inputs['resourceName']}"
    )


def body(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The ARM body of a resource: the :data:`BODY_KEYS` present in its inputs (or outputs)."""
    return {k: inputs[k] for k in BODY_KEYS if k in inputs and inputs[k] is not None}


def _at(data: Any, path: Path) -> Any:
    for step in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(step)
    return data


def changes(olds: Mapping[str, Any], news: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(changed top-level keys, dotted paths among them that force a replacement) between two input sets."""
    keys = sorted((set(olds) | set(news)) - {pulumi.dynamic.dynamic.PROVIDER_KEY})
    changed = [k for k in keys if olds.get(k) != news.get(k)]
    kind = KINDS.get(str(news.get(MARKER, olds.get(MARKER))))
    replace_on = kind.replace_on if kind else tuple((k,) for k in ADDRESS_KEYS)
    replaces = [".".join(p) for p in replace_on if _at(olds, p) != _at(news, p)]
    if olds.get(MARKER) != news.get(MARKER):
        replaces.insert(0, MARKER)
    return changed, replaces


ClientFactory = Callable[[str], Any]


class ComputeProvider(pulumi.dynamic.ResourceProvider):
    """Creates, updates and deletes the resources of :data:`KINDS` through ``azure-mgmt-compute``.

    In a deployment the credential is ``DefaultAzureCredential`` (the same identity the azure-native provider
    uses: ``az login``, a service principal's environment, workload identity or a managed identity). Tests pass
    ``client_factory`` to reach a fake HTTP transport; it is not set in a deployment, so nothing but the class
    reference is pickled.
    """

    serialize_as_secret_always = False  # it captures no secret, so the state shows it in the clear

    def __init__(self, client_factory: ClientFactory | None = None) -> None:
        super().__init__()
        self._client_factory = client_factory

    def _client(self, subscription_id: str) -> Any:
        if self._client_factory is not None:
            return self._client_factory(subscription_id)
        from azure.identity import DefaultAzureCredential  # noqa: PLC0415 - only a deployment needs it
        from azure.mgmt.compute import ComputeManagementClient  # noqa: PLC0415

        return ComputeManagementClient(DefaultAzureCredential(), subscription_id)

    def _put(self, props: Mapping[str, Any]) -> dict[str, Any]:
        from azure.mgmt.compute import models  # noqa: PLC0415

        kind = KINDS[str(props[MARKER])]
        model = getattr(models, kind.model)(body(props))
        operations = getattr(self._client(str(props["subscriptionId"])), kind.operations)
        poller = operations.begin_create_or_update(
            props["resourceGroupName"],
            props["resourceName"],
            model,
            api_version=props["apiVersion"],
        )
        result = poller.result()
        outs = {k: v for k, v in props.items() if k != pulumi.dynamic.dynamic.PROVIDER_KEY}
        outs["id"] = getattr(result, "id", None) or arm_id(props)
        state = getattr(getattr(result, "properties", None), "provisioning_state", None)
        if state is not None:
            outs["provisioningState"] = state
        return outs

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        outs = self._put(props)
        return pulumi.dynamic.CreateResult(id_=outs["id"], outs=outs)

    def diff(self, _id: str, _olds: dict[str, Any], _news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        olds = {k: v for k, v in _olds.items() if k not in ("id", "provisioningState")}
        changed, replaces = changes(olds, _news)
        # Azure names are fixed, so a replacement must delete the old resource before creating the new one.
        return pulumi.dynamic.DiffResult(
            changes=bool(changed),
            replaces=replaces,
            stables=[k for k in ("subscriptionId", "resourceGroupName", "resourceName") if k not in changed],
            delete_before_replace=True,
        )

    def update(self, _id: str, _olds: dict[str, Any], _news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        return pulumi.dynamic.UpdateResult(outs=self._put(_news))

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        from azure.core.exceptions import ResourceNotFoundError  # noqa: PLC0415

        kind = KINDS[str(_props[MARKER])]
        operations = getattr(self._client(str(_props["subscriptionId"])), kind.operations)
        try:
            operations.begin_delete(
                _props["resourceGroupName"], _props["resourceName"], api_version=_props["apiVersion"]
            ).result()
        except ResourceNotFoundError:
            return  # already gone: deleting is done

    def read(self, id_: str, props: dict[str, Any]) -> pulumi.dynamic.ReadResult:
        """Refresh: the stored state while the resource exists; an empty id once Azure no longer has it."""
        from azure.core.exceptions import ResourceNotFoundError  # noqa: PLC0415

        kind = KINDS[str(props[MARKER])]
        operations = getattr(self._client(str(props["subscriptionId"])), kind.operations)
        try:
            operations.get(props["resourceGroupName"], props["resourceName"], api_version=props["apiVersion"])
        except ResourceNotFoundError:
            return pulumi.dynamic.ReadResult(id_=None, outs={})
        return pulumi.dynamic.ReadResult(id_=id_, outs=props)


_PROVIDER = ComputeProvider()
_SERIALIZED: list[str] = []  # the provider as pulumi.dynamic pickles it, computed once per process


def serialized_provider() -> str:
    """The ``__provider`` input every resource carries: ``pulumi.dynamic.serialize_provider(_PROVIDER)``, once.

    The SDK pickles the provider again for every dynamic resource (dill, about a millisecond each); the provider
    captures nothing that differs between resources (no client factory, no secret), so every pickle is the same
    string. One shared string also keeps a 1,388-rack plan from holding 1,388 equal copies.
    """
    if not _SERIALIZED:
        pickle._Pickler._batch_setitems = _PICKLER_BATCH_SETITEMS  # type: ignore[attr-defined]
        try:
            _SERIALIZED.append(pulumi.dynamic.dynamic.serialize_provider(_PROVIDER))
        finally:
            pickle._Pickler._batch_setitems = _PICKLER_BATCH_SETITEMS  # type: ignore[attr-defined]
    return _SERIALIZED[0]


class ComputeResource(pulumi.dynamic.Resource):
    """One resource of :data:`KINDS`: addressing, marker and ARM body as inputs; ``id`` is its Azure id."""

    def __init__(
        self,
        name: str,
        *,
        kind: str,
        api_version: str,
        subscription_id: pulumi.Input[str],
        resource_group_name: pulumi.Input[str],
        resource_name: str,
        arm_body: Mapping[str, Any],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        unknown = sorted(set(arm_body) - set(BODY_KEYS))
        if unknown:
            raise ValueError(f"ARM body keys {unknown} are not among {BODY_KEYS}")
        inputs: dict[str, Any] = {
            MARKER: kind,
            "resourceType": KINDS[kind].resource_type,
            "apiVersion": api_version,
            "subscriptionId": subscription_id,
            "resourceGroupName": resource_group_name,
            "resourceName": resource_name,
            **{k: arm_body[k] for k in BODY_KEYS if k in arm_body},
        }
        # What pulumi.dynamic.Resource.__init__ does (the provider is never a secret: serialize_as_secret_always is
        # False and it captures no output), with the provider pickled once per process instead of per resource.
        inputs[pulumi.dynamic.dynamic.PROVIDER_KEY] = serialized_provider()
        pulumi.CustomResource.__init__(self, f"pulumi-python:{self._resource_type_name}", name, inputs, opts)


def is_kind(inputs: Mapping[str, Any], kinds: Sequence[str]) -> bool:
    return inputs.get(MARKER) in kinds
