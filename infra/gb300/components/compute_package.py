"""pulumi-azure-native's compute module at Compute API 2026-03-01, as a parameterized package.

The default pulumi-azure-native SDK types ``compute.VirtualMachineScaleSet`` at API 2024-11-01, which has no
``virtualMachineProfile.networkProfile.interconnectGroupProfile`` and no ``interconnectBlockProfile``. Its
docstring names 2026-03-01 among the versions a project reaches through a *local package* (``pulumi package add
azure-native compute v20260301``): the same azure-native plugin, parameterized to serve one module at one API
version. Resources of that package are served by the plugin's gRPC server at the
engine's full parallelism, with the provider's authentication, real reads, refresh, import, retries and
``customTimeouts`` (docs/fabric.md).

This module registers the package and its resources exactly as the SDK that ``pulumi package add`` generates
does, and keeps every constant of that registration in one place (``tests/components/test_compute_package.py``
pins them; the ``compute-package`` job of ``.github/workflows/pr.yml`` asks the real plugin for the package's
schema and holds these constants and the rack inputs to it):

* The plugin's ``Parameterize`` (pulumi/pulumi-azure-native ``provider/pkg/provider/provider_parameterize.go``)
  takes the arguments ``[module, version]`` (``compute``, ``v20260301``; ``parseApiVersion`` also accepts
  ``2026-03-01`` and normalises it to this form), names the package ``azure-native_<module>_<version>`` and its
  tokens ``<package>:<module>:<Resource>`` (``makeToken``; early releases wrote ``<module>/<version>``), and writes
  the schema's parameter as the *base64 text* of the compact JSON ``{"module":...,"version":...}``
  (``serializeParameterizeArgs``).
* pulumi's Python code generator (pulumi/pulumi ``pkg/codegen/python/gen.go``) writes ``_utilities.get_package()``
  calling ``pulumi.runtime.register_package`` with the base provider's name and version, the package name and
  version, and ``base64_parameter`` = the base64 of the schema's parameter bytes; every resource passes
  ``package_ref=_utilities.get_package()``. The SDK (``pulumi/runtime/settings.py``) decodes that base64 once and
  sends the bytes as ``RegisterPackageRequest.parameterization.value``; the plugin base64-decodes them again.

gb300 writes the resources' inputs as the package's schema takes them: camelCase, with the ``properties``
envelopes azure-native flattens (the scale set's own, and its network, IP configuration and extension entries)
flattened, and ``identity.userAssignedIdentities`` as a list of ids. :func:`gb300.azure.contract.arm_body`
rebuilds the ARM body from them to hold it against Azure's models.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import pulumi

BASE_PROVIDER = "azure-native"
BASE_PROVIDER_VERSION = "3.29.0"  # the pulumi-azure-native pinned in constraints.txt; the plugin that serves it
MODULE = "compute"
API_VERSION = "2026-03-01"  # as Azure writes it (the REST api-version)
SDK_VERSION = "v20260301"  # as azure-native's tokens and Parameterize arguments write it
PACKAGE_NAME = f"{BASE_PROVIDER}_{MODULE}_{SDK_VERSION}"
PACKAGE_VERSION = BASE_PROVIDER_VERSION  # a parameterized package takes its base provider's schema version
PARAMETER_JSON = json.dumps({"module": MODULE, "version": SDK_VERSION}, separators=(",", ":"))
PARAMETER = base64.b64encode(PARAMETER_JSON.encode()).decode()  # the schema's parameter: base64 text of the JSON
BASE64_PARAMETER = base64.b64encode(PARAMETER.encode()).decode()  # what the generated SDK hands register_package

VIRTUAL_MACHINE_SCALE_SET = "VirtualMachineScaleSet"
# The package's resources gb300 declares. Whether azure-native 3.29's compute 2026-03-01 schema includes
# Microsoft.Compute/interconnectBlocks is not verified (Azure's 2026-03-01 specification gained it in May 2026;
# data/skus.yaml fabricModels.interconnect-group.interconnectBlocks), so racks carry no interconnect block and
# gb300:gpuPools[].interconnectBlocks must stay false until the compute-package CI job shows the resource.
RESOURCES = (VIRTUAL_MACHINE_SCALE_SET,)


def token(resource: str) -> str:
    """The type token of a resource of the package: ``azure-native_compute_v20260301:compute:<resource>``."""
    return f"{PACKAGE_NAME}:{MODULE}:{resource}"


SCALE_SET_TOKEN = token(VIRTUAL_MACHINE_SCALE_SET)


async def get_package() -> str:
    """Register the package with the engine (once per deployment: the SDK caches the reference) and return its
    reference, as the generated ``_utilities.get_package()`` does."""
    return await pulumi.runtime.register_package(
        base_provider_name=BASE_PROVIDER,
        base_provider_version=BASE_PROVIDER_VERSION,
        base_provider_download_url="",  # azure-native's get_plugin_download_url() is None: the default source
        package_name=PACKAGE_NAME,
        package_version=PACKAGE_VERSION,
        base64_parameter=BASE64_PARAMETER,
    )


# Inputs Azure fixes at creation; the schema marks them replace-on-change, so the engine plans a replacement. A
# GB rack's VM size and fabric define the rack: a change is a new rack, never a resize in place.
SCALE_SET_REPLACE_ON_CHANGES = (
    "zones",
    "sku.name",
    "orchestrationMode",
    "platformFaultDomainCount",
    "singlePlacementGroup",
    "virtualMachineProfile.networkProfile.interconnectGroupProfile",
    "virtualMachineProfile.interconnectBlockProfile",
)


class _PackageResource(pulumi.CustomResource):
    """A resource of the package, registered as the generated SDK registers it: the package's token, the provider
    version option the generated ``get_resource_opts_defaults()`` sets, and ``package_ref=get_package()``."""

    _token: str
    _outputs: tuple[str, ...] = ("name", "provisioningState", "type", "azureApiVersion")

    def __init__(self, resource_name: str, props: Mapping[str, Any], opts: pulumi.ResourceOptions | None) -> None:
        opts = pulumi.ResourceOptions.merge(pulumi.ResourceOptions(version=PACKAGE_VERSION), opts)
        inputs: dict[str, Any] = {k: v for k, v in props.items() if v is not None}
        for key in self._outputs:
            inputs.setdefault(key, None)
        super().__init__(self._token, resource_name, inputs, opts, package_ref=get_package())


class VirtualMachineScaleSet(_PackageResource):
    """``Microsoft.Compute/virtualMachineScaleSets`` at API 2026-03-01 (azure-native's inputs, camelCase)."""

    _token = SCALE_SET_TOKEN

    def __init__(
        self,
        resource_name: str,
        opts: pulumi.ResourceOptions | None = None,
        *,
        resource_group_name: pulumi.Input[str],
        vm_scale_set_name: str,
        location: pulumi.Input[str],
        sku: Mapping[str, Any],
        identity: pulumi.Input[Mapping[str, Any]] | None = None,
        zones: list[str] | None = None,
        orchestration_mode: str | None = None,
        single_placement_group: bool | None = None,
        overprovision: bool | None = None,
        platform_fault_domain_count: int | None = None,
        upgrade_policy: Mapping[str, Any] | None = None,
        virtual_machine_profile: Mapping[str, Any] | None = None,
        tags: Mapping[str, pulumi.Input[str]] | None = None,
    ) -> None:
        props = {
            "resourceGroupName": resource_group_name,
            "vmScaleSetName": vm_scale_set_name,
            "location": location,
            "zones": zones,
            "sku": sku,
            "identity": identity,
            "orchestrationMode": orchestration_mode,
            "singlePlacementGroup": single_placement_group,
            "overprovision": overprovision,
            "platformFaultDomainCount": platform_fault_domain_count,
            "upgradePolicy": upgrade_policy,
            "virtualMachineProfile": virtual_machine_profile,
            "tags": tags,
        }
        opts = pulumi.ResourceOptions.merge(
            pulumi.ResourceOptions(replace_on_changes=list(SCALE_SET_REPLACE_ON_CHANGES)), opts
        )
        super().__init__(resource_name, props, opts)


# azure-native's provider configuration (pulumi/pulumi-azure-native provider/pkg/provider/auth_azidentity.go and the
# provider schema's `config`): what a stack sets under `azure-native:` to choose the subscription, cloud and sign-in.
PROVIDER_CONFIG = (
    "subscriptionId",
    "tenantId",
    "clientId",
    "environment",
    "location",
    "metadataHost",
    "useMsi",
    "msiEndpoint",
    "useOidc",
    "oidcRequestUrl",
    "oidcTokenFilePath",
    "clientCertificatePath",
    "auxiliaryTenantIds",
    "partnerId",
    "disablePulumiPartnerId",
    "useDefaultAzureCredential",
)
PROVIDER_SECRET_CONFIG = ("clientSecret", "clientCertificatePassword", "oidcToken", "oidcRequestToken")


class Provider(pulumi.ProviderResource):
    """An explicit provider of the package (``pulumi:providers:azure-native_compute_v20260301``), as the generated
    SDK's ``Provider`` class registers it.

    The engine configures a parameterized package's default provider from the package's own namespace
    (``azure-native_compute_v20260301:*``), never from ``azure-native:*`` (pulumi/pulumi
    ``pkg/resource/deploy/providers/provider.go``, ``default_providers.go``). :func:`provider_from_stack` builds
    this provider from the stack's ``azure-native:*`` settings instead, so the subscription, tenant, cloud and
    sign-in a user gives azure-native reach the racks too. The ``ARM_*`` variables reach both either way.
    """

    def __init__(
        self, resource_name: str, props: Mapping[str, Any], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        opts = pulumi.ResourceOptions.merge(pulumi.ResourceOptions(version=PACKAGE_VERSION), opts)
        super().__init__(PACKAGE_NAME, resource_name, dict(props), opts, package_ref=get_package())


def provider_settings(config: pulumi.Config) -> dict[str, pulumi.Input[str]]:
    """The ``azure-native:*`` settings a stack gives (text, as provider configuration is), secrets kept secret."""
    settings: dict[str, pulumi.Input[str]] = {}
    for key in PROVIDER_CONFIG:
        value = config.get(key)
        if value is not None:
            settings[key] = value
    for key in PROVIDER_SECRET_CONFIG:
        secret = config.get_secret(key)
        if secret is not None:
            settings[key] = secret
    return settings


def provider_from_stack(resource_name: str) -> Provider:
    """The package's provider with the stack's ``azure-native:*`` settings (see :class:`Provider`)."""
    return Provider(resource_name, provider_settings(pulumi.Config(BASE_PROVIDER)))


def is_package_type(type_: str) -> bool:
    """Whether a registration's type token is one of this package's."""
    return type_.startswith(f"{PACKAGE_NAME}:")
