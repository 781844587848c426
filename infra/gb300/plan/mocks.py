"""Mocks for the offline plan, on the Pulumi SDK's own mock monitor.

:class:`AzureMocks` answers resource registrations with ids shaped like real Azure resource ids and echoes
the inputs as outputs, adding the few outputs Azure computes (principal ids, endpoints).
:class:`RecordingMonitor` is the SDK's ``MockMonitor`` that also keeps, for each registration, the URN,
parent and the data-safety options (``protect``, ``retainOnDelete``, ``replaceOnChanges``,
``deleteBeforeReplace``) and explicit and input dependencies, which the mocks interface does not pass on. It
builds URNs as the engine does and notes every URN registered twice, which the engine refuses.
"""

from __future__ import annotations

import base64
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pulumi.runtime import MockCallArgs, MockResourceArgs, Mocks
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.settings import get_project, get_stack

from gb300.components import compute_package

SUBSCRIPTION_ID = "00000000-0000-0000-0000-000000000000"
ROOT_STACK_TYPE = "pulumi:pulumi:Stack"
TENANT_ID = "11111111-1111-1111-1111-111111111111"
SHARED_STRING_BYTES = 1024  # inputs at least this long are kept once (custom data, scripts), not once per resource
# Per-rack types the mocks answer with their name and computed outputs only, not with an echo of their inputs as the
# engine's preview would: the program reads nothing of a rack's scale set or logs association but its id, and
# echoing a 1,388-rack pool's inputs (9.6 KB per scale set) back through protobuf and into outputs nobody reads cost
# about a tenth of the plan's CPU and 40 MiB of its peak (docs/scale.md). tests/plan/test_mocks.py holds
# that the plan (resources, findings, summary) is the same with the full echo.
NAME_ONLY_ANSWERS = frozenset({compute_package.SCALE_SET_TOKEN, "azure-native:monitor:DataCollectionRuleAssociation"})

# Pulumi module -> ARM resource provider namespace.
NAMESPACES = {
    "alertsmanagement": "Microsoft.AlertsManagement",
    "authorization": "Microsoft.Authorization",
    "compute": "Microsoft.Compute",
    "dashboard": "Microsoft.Dashboard",
    "insights": "Microsoft.Insights",
    "keyvault": "Microsoft.KeyVault",
    "managedidentity": "Microsoft.ManagedIdentity",
    "monitor": "Microsoft.Insights",
    "network": "Microsoft.Network",
    "operationalinsights": "Microsoft.OperationalInsights",
    "privatedns": "Microsoft.Network",
    "storage": "Microsoft.Storage",
    "storagecache": "Microsoft.StorageCache",
}
# Pulumi resource -> (ARM collection, input naming the resource, parent collection and its name input).
_IRREGULAR: dict[str, tuple[str, str]] = {
    "managedidentity:UserAssignedIdentity": ("userAssignedIdentities", "resourceName"),
    "compute:VirtualMachineScaleSet": ("virtualMachineScaleSets", "vmScaleSetName"),
    "network:PublicIPAddress": ("publicIPAddresses", "publicIpAddressName"),
    "storage:StorageAccount": ("storageAccounts", "accountName"),
    "storagecache:AmlFilesystem": ("amlFilesystems", "amlFilesystemName"),
    "keyvault:Vault": ("vaults", "vaultName"),
    "keyvault:Secret": ("secrets", "secretName"),
    "authorization:RoleAssignment": ("roleAssignments", "roleAssignmentName"),
    "authorization:ManagementLockByScope": ("locks", "lockName"),
    "operationalinsights:Workspace": ("workspaces", "workspaceName"),
    "operationalinsights:Table": ("tables", "tableName"),
    "monitor:AzureMonitorWorkspace": ("accounts", "azureMonitorWorkspaceName"),
    "dashboard:Grafana": ("grafana", "workspaceName"),
    "privatedns:PrivateZone": ("privateDnsZones", "privateZoneName"),
    "privatedns:VirtualNetworkLink": ("virtualNetworkLinks", "virtualNetworkLinkName"),
    "network:PrivateDnsZoneGroup": ("privateDnsZoneGroups", "privateDnsZoneGroupName"),
    "storage:BlobContainer": ("containers", "containerName"),
    "storage:ManagementPolicy": ("managementPolicies", "managementPolicyName"),
}
# Resource types whose ARM namespace differs from their Pulumi module's.
_NAMESPACE_OF: dict[str, str] = {"monitor:AzureMonitorWorkspace": "Microsoft.Monitor"}
# Extension resources: their id hangs under the resource named by this input.
_EXTENSIONS: dict[str, tuple[str, str]] = {
    "monitor:DataCollectionRuleAssociation": ("resourceUri", "Microsoft.Insights/dataCollectionRuleAssociations"),
    "authorization:ManagementLockByScope": ("scope", "Microsoft.Authorization/locks"),
}
_CHILDREN: dict[str, tuple[str, str]] = {
    "network:Subnet": ("virtualNetworks", "virtualNetworkName"),
    "keyvault:Secret": ("vaults", "vaultName"),
    "storage:BlobContainer": ("storageAccounts/{accountName}/blobServices", "default"),
    "storage:ManagementPolicy": ("storageAccounts", "accountName"),
    "operationalinsights:Table": ("workspaces", "workspaceName"),
    "privatedns:VirtualNetworkLink": ("privateDnsZones", "privateZoneName"),
    "network:PrivateDnsZoneGroup": ("privateEndpoints", "privateEndpointName"),
}


class _KeepMissing(dict[str, Any]):
    """Formatting values that leave an unknown ``{key}`` as it is."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _guid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(parts)))


def azure_native_type(typ: str) -> str:
    """``azure-native:<module>:<Resource>`` for a resource of azure-native or of one of its parameterized packages
    (``azure-native_compute_v20260301:compute:VirtualMachineScaleSet``); other types as they are."""
    if compute_package.is_package_type(typ):
        _, module, resource = typ.split(":")
        return f"azure-native:{module}:{resource}"
    return typ


def azure_name(typ: str, name: str, inputs: dict[str, Any]) -> str:
    """The Azure name a resource gets: its explicit name input, else the Pulumi name."""
    typ = azure_native_type(typ)
    _, module_type = typ.split(":", 1) if typ.count(":") == 2 else ("", typ)
    resource = module_type.split(":")[-1]
    key = _IRREGULAR.get(module_type, ("", f"{_lower_first(resource)}Name"))[1]
    for candidate in (key, "resourceName", f"{_lower_first(resource)}Name"):
        value = inputs.get(candidate)
        if isinstance(value, str) and value:
            return value
    return name


def arm_id(  # noqa: PLR0911 - one return per id shape
    typ: str, name: str, inputs: dict[str, Any], subscription: str | None = None
) -> str:
    """An id shaped like the real Azure resource id of a registration, in ``subscription`` (default: the mocks')."""
    typ = azure_native_type(typ)
    pkg, module, resource = typ.split(":")
    if pkg != "azure-native":
        return f"{typ}::{name}"
    sub = f"/subscriptions/{subscription or SUBSCRIPTION_ID}"
    if f"{module}:{resource}" == "resources:ResourceGroup":
        return f"{sub}/resourceGroups/{inputs.get('resourceGroupName', name)}"
    rg = inputs.get("resourceGroupName", "rg")
    own = azure_name(typ, name, inputs)
    if f"{module}:{resource}" == "resources:Resource":
        parent = inputs.get("parentResourcePath") or ""
        path = f"{parent}/" if parent else ""
        return (
            f"{sub}/resourceGroups/{rg}/providers/{inputs['resourceProviderNamespace']}/"
            f"{path}{inputs['resourceType']}/{own}"
        )
    if f"{module}:{resource}" == "authorization:RoleAssignment":
        scope = inputs.get("scope", sub)
        own_name = inputs.get("roleAssignmentName") or _guid(scope, name)
        return f"{scope}/providers/Microsoft.Authorization/roleAssignments/{own_name}"
    if f"{module}:{resource}" in _EXTENSIONS:
        target_key, collection_path = _EXTENSIONS[f"{module}:{resource}"]
        return f"{inputs.get(target_key, sub)}/providers/{collection_path}/{own}"
    namespace = _NAMESPACE_OF.get(f"{module}:{resource}", NAMESPACES.get(module, f"Microsoft.{module.capitalize()}"))
    collection = _IRREGULAR.get(f"{module}:{resource}", (f"{_lower_first(resource)}s", ""))[0]
    if f"{module}:{resource}" in _CHILDREN:
        parent_collection, parent_key = _CHILDREN[f"{module}:{resource}"]
        parent_collection = parent_collection.format_map(_KeepMissing(inputs))
        parent_name = inputs.get(parent_key, parent_key)
        return f"{sub}/resourceGroups/{rg}/providers/{namespace}/{parent_collection}/{parent_name}/{collection}/{own}"
    return f"{sub}/resourceGroups/{rg}/providers/{namespace}/{collection}/{own}"


def _identity(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {"principalId": _guid("principal", name), "clientId": _guid("client", name), "tenantId": TENANT_ID}


def _storage_account(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    account = azure_name(typ, name, inputs)
    return {
        "primaryEndpoints": {
            "blob": f"https://{account}.blob.core.windows.net/",
            "dfs": f"https://{account}.dfs.core.windows.net/",
        }
    }


def _vault(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {
        "properties": {
            **inputs.get("properties", {}),
            "vaultUri": f"https://{azure_name(typ, name, inputs)}.vault.azure.net/",
        }
    }


def _random_string(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {"result": "x" * int(inputs.get("length", 6))}


def _random_bytes(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    # Deterministic stand-in bytes; the plan records this as a secret and never prints it.
    return {"base64": base64.b64encode(b"\0" * int(inputs.get("length", 32))).decode(), "hex": "00"}


def _collection_endpoint(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    dce = f"{azure_name(typ, name, inputs)}-{_guid('dce', name)[:4]}.{inputs.get('location', 'eastus2')}"
    return {
        "immutableId": f"dce-{_guid('dce-immutable', name).replace('-', '')}",
        "metricsIngestion": {"endpoint": f"https://{dce}-1.metrics.ingest.monitor.azure.com"},
        "logsIngestion": {"endpoint": f"https://{dce}-1.ingest.monitor.azure.com"},
        "configurationAccess": {"endpoint": f"https://{dce}-1.handler.control.monitor.azure.com"},
    }


def _collection_rule(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {"immutableId": f"dcr-{_guid('dcr-immutable', name).replace('-', '')}"}


def _monitor_workspace(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    account = azure_name(typ, name, inputs)
    return {"metrics": {"prometheusQueryEndpoint": f"https://{account}.eastus2.prometheus.monitor.azure.com"}}


def _grafana(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {
        "identity": {
            **(inputs.get("identity") or {}),
            "principalId": _guid("principal", name),
            "tenantId": TENANT_ID,
        },
        "properties": {
            **(inputs.get("properties") or {}),
            "endpoint": f"https://{azure_name(typ, name, inputs)}.eus2.grafana.azure.com",
        },
    }


def _log_workspace(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {"customerId": _guid("workspace", name)}


def _lustre(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {"clientInfo": {"mgsAddress": "10.40.8.4", "mountCommand": "mount -t lustre 10.40.8.4@tcp:/lustrefs"}}


_COMPUTED: dict[str, Callable[[str, str, dict[str, Any]], dict[str, Any]]] = {
    "azure-native:managedidentity:UserAssignedIdentity": _identity,
    "azure-native:storage:StorageAccount": _storage_account,
    "azure-native:keyvault:Vault": _vault,
    "random:index/randomString:RandomString": _random_string,
    "random:index/randomBytes:RandomBytes": _random_bytes,
    "azure-native:monitor:DataCollectionEndpoint": _collection_endpoint,
    "azure-native:monitor:DataCollectionRule": _collection_rule,
    "azure-native:monitor:AzureMonitorWorkspace": _monitor_workspace,
    "azure-native:dashboard:Grafana": _grafana,
    "azure-native:operationalinsights:Workspace": _log_workspace,
    "azure-native:storagecache:AmlFilesystem": _lustre,
}
"""Resource type -> the outputs Azure computes for it that other resources read."""


def computed_outputs(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Outputs Azure computes that other resources read (ids of principals, endpoints, addresses)."""
    compute = _COMPUTED.get(typ)
    out = compute(typ, name, inputs) if compute is not None else {}
    identity = inputs.get("identity")
    ids = identity.get("userAssignedIdentities") if isinstance(identity, dict) else None
    if isinstance(identity, dict) and isinstance(ids, list):  # a list of ids in; Azure answers a map keyed by id
        out["identity"] = {**identity, "userAssignedIdentities": {i: {} for i in ids}}
    return out


# Azure Managed Lustre's recommended subnet per capacity (learn.microsoft.com azure-managed-lustre/
# amlfs-prerequisites, "Network size requirements"): up to N TiB -> prefix. The mock answers
# getRequiredAmlFSSubnetsSize with the usable addresses of that prefix (Azure reserves five per subnet).
_AMLFS_SUBNET_PREFIX = ((16, 27), (40, 26), (92, 25), (196, 24), (400, 23))


def amlfs_subnet_addresses(capacity_tib: float) -> int:
    """Addresses a Lustre filesystem of ``capacity_tib`` needs, as the mocks answer Azure's invoke."""
    prefix = next((p for limit, p in _AMLFS_SUBNET_PREFIX if capacity_tib <= limit), 22)
    return int(2 ** (32 - prefix)) - 5


class AzureMocks(Mocks):
    """Answers the program's registrations and invokes as Azure would, without calling Azure.

    ``subscription_id``: the subscription the deployer signs in to (``getClientConfig``) and the ids name; default
    :data:`SUBSCRIPTION_ID`. Names gb300 derives from it (the payload and data storage accounts, and so the custom
    data that names the payload account) are the deployed ones only under the deployed subscription.
    """

    def __init__(self, *, echo_all: bool = False, subscription_id: str | None = None) -> None:
        self.subscription_id = subscription_id
        self.recorder: RecordingMonitor | None = None
        self._strings: dict[str, str] = {}
        self._name_only = frozenset() if echo_all else NAME_ONLY_ANSWERS  # echo_all: every answer echoes its inputs

    def _share(self, value: Any) -> Any:
        """``value`` with every long string replaced, in place, by the first equal one seen.

        The SDK hands each registration's inputs over as a fresh copy: 1,388 racks carry 1,388 copies of the same
        custom data, which the plan keeps. One shared copy is what the program itself holds (docs/scale.md).
        """
        if isinstance(value, str):
            return self._strings.setdefault(value, value) if len(value) >= SHARED_STRING_BYTES else value
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, str | dict | list):
                    value[key] = self._share(item)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, str | dict | list):
                    value[i] = self._share(item)
        return value

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self._share(args.inputs)
        id_ = arm_id(args.typ, args.name, args.inputs, self.subscription_id) if args.custom else None
        name = azure_name(args.typ, args.name, args.inputs)
        state = {"name": name} if args.typ in self._name_only else {**args.inputs, "name": name}
        state.update(computed_outputs(args.typ, args.name, args.inputs))
        if self.recorder is not None:
            self.recorder.record(args, id_)
        return id_, state

    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        if args.token == "azure-native:authorization:getClientConfig":  # noqa: S105 - an invoke token
            return {
                "clientId": _guid("deployer"),
                "objectId": _guid("deployer-object"),
                "subscriptionId": self.subscription_id or SUBSCRIPTION_ID,
                "tenantId": TENANT_ID,
            }, []
        if args.token == "azure-native:storagecache:getRequiredAmlFSSubnetsSize":  # noqa: S105
            return {"filesystemSubnetSize": amlfs_subnet_addresses(float(args.args.get("storageCapacityTiB", 0)))}, []
        return {}, []


@dataclass(frozen=True)
class Registration:
    """What the engine would have been asked to create: the raw facts of one registration."""

    urn: str
    type: str
    name: str
    parent: str | None
    protect: bool
    custom: bool
    id: str | None
    inputs: dict[str, Any]
    retain_on_delete: bool = False
    replace_on_changes: tuple[str, ...] = ()
    delete_before_replace: bool = False
    dependencies: tuple[str, ...] = ()  # URNs this resource waits for: depends_on and the inputs' resources
    package: Mapping[str, str] | None = None  # the parameterized package its packageRef names (RegisterPackage)
    custom_timeouts: Mapping[str, str] | None = None  # create/update/delete, as the engine receives them
    provider: str | None = None  # an explicit provider's reference (``<urn>::<id>``), else the default provider


def engine_urn(stack: str, project: str, parent: str, type_: str, name: str) -> str:
    """The URN the Pulumi engine gives a registration (pulumi/pulumi ``Deployment.generateURN``, ``urn.New``).

    A child's type is qualified by its parent's whole qualified type, except under the root stack, whose type
    never appears: ``urn:pulumi:<stack>::<project>::<parent types$>type::<name>``.
    """
    parent_type = parent.split("::")[2] if parent else ""
    if parent_type and parent_type != ROOT_STACK_TYPE:
        type_ = f"{parent_type}${type_}"
    return f"urn:pulumi:{stack}::{project}::{type_}::{name}"


def _timeouts(request: Any) -> dict[str, str] | None:
    """A registration's custom timeouts (create, update, delete) that are set, or None."""
    timeouts = request.customTimeouts if request.HasField("customTimeouts") else None
    found = {k: getattr(timeouts, k) for k in ("create", "update", "delete") if timeouts and getattr(timeouts, k)}
    return found or None


class RecordingMonitor(MockMonitor):
    """The SDK's mock monitor, keeping every registration with its URN, parent and protect flag."""

    def __init__(self, mocks: AzureMocks) -> None:
        super().__init__(mocks)
        mocks.recorder = self
        self.registrations: list[Registration] = []
        self.duplicates: list[str] = []  # URNs registered more than once, in order
        self._seen: set[str] = set()
        self._local = threading.local()
        self._lock = threading.Lock()
        self.packages: dict[str, dict[str, str]] = {}  # package reference -> the RegisterPackage request

    def RegisterPackage(self, request: Any) -> Any:  # noqa: N802 - the gRPC method name
        """The SDK's answer (a reference), keeping what the program asked for: the base provider and the
        parameterization (package name, version and the parameter bytes, base64 here) the plugin would get."""
        response = super().RegisterPackage(request)  # type: ignore[no-untyped-call]
        param = request.parameterization
        with self._lock:
            self.packages[response.ref] = {
                "baseProvider": request.name,
                "baseProviderVersion": request.version,
                "downloadUrl": request.download_url,
                "name": param.name,
                "version": param.version,
                "parameter": base64.b64encode(param.value).decode(),
            }
        return response

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        """The engine's URN, not the SDK mock's (which keeps the stack type and only the parent's last type)."""
        return engine_urn(get_stack(), get_project(), parent, type_, name)

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - the gRPC method name
        urn = self.make_urn(request.parent, request.type, request.name)
        with self._lock:
            if urn in self._seen:
                self.duplicates.append(urn)
            self._seen.add(urn)
        self._local.request = request
        try:
            return super().RegisterResource(request)  # type: ignore[no-untyped-call]
        finally:
            self._local.request = None

    def record(self, args: MockResourceArgs, id_: str | None) -> None:
        request = self._local.request
        urn = self.make_urn(request.parent, request.type, request.name)
        registration = Registration(
            urn=urn,
            type=args.typ,
            name=args.name,
            parent=request.parent or None,
            protect=bool(request.protect),
            custom=bool(args.custom),
            id=id_,
            inputs=args.inputs,
            retain_on_delete=bool(getattr(request, "retainOnDelete", False)),
            replace_on_changes=tuple(getattr(request, "replaceOnChanges", ()) or ()),
            delete_before_replace=bool(getattr(request, "deleteBeforeReplace", False)),
            dependencies=tuple(sorted(set(request.dependencies))),
            package=self.packages.get(request.packageRef) if request.packageRef else None,
            custom_timeouts=_timeouts(request),
            provider=request.provider or None,
        )
        with self._lock:
            self.registrations.append(registration)
