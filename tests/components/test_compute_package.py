"""Tests of :mod:`gb300.components.compute_package`: the racks' azure-native package, registered as the SDK that
``pulumi package add azure-native compute v20260301`` generates registers it."""

from __future__ import annotations

import base64
import importlib.metadata

from gb300 import paths
from gb300.azure import inventory
from gb300.components import compute_package
from gb300.plan import PlanResult


def test_the_package_constants_are_pinned() -> None:
    """Name, token, version and parameter are exactly what azure-native's Parameterize and pulumi's Python code
    generator produce for compute v20260301 (provider_parameterize.go, gen.go)."""
    assert compute_package.PACKAGE_NAME == "azure-native_compute_v20260301"
    assert compute_package.SCALE_SET_TOKEN == "azure-native_compute_v20260301:compute:VirtualMachineScaleSet"  # noqa: S105
    assert compute_package.PARAMETER_JSON == '{"module":"compute","version":"v20260301"}'
    assert compute_package.PARAMETER == "eyJtb2R1bGUiOiJjb21wdXRlIiwidmVyc2lvbiI6InYyMDI2MDMwMSJ9"
    # The generated SDK hands register_package the base64 of the schema's parameter bytes (themselves base64 text).
    assert (
        base64.b64decode(base64.b64decode(compute_package.BASE64_PARAMETER)) == compute_package.PARAMETER_JSON.encode()
    )
    assert compute_package.API_VERSION == "2026-03-01"


def test_the_base_provider_version_is_the_pinned_azure_native() -> None:
    """The package runs on the azure-native plugin of the pulumi-azure-native the project pins and installs."""
    pins = dict(
        line.split("==", 1) for line in (paths.REPO_ROOT / "constraints.txt").read_text().split() if "==" in line
    )
    assert pins["pulumi_azure_native"] == compute_package.BASE_PROVIDER_VERSION
    assert importlib.metadata.version("pulumi_azure_native") == compute_package.BASE_PROVIDER_VERSION


def test_the_plan_records_the_package_request_and_each_racks_reference(reference_plan: PlanResult) -> None:
    """Through the SDK's mock monitor, every rack scale set carries a package reference whose RegisterPackage
    request names azure-native 3.29.0 parameterized to compute v20260301, and uses the explicit package provider."""
    racks = [r for r in reference_plan.resources if r.type == compute_package.SCALE_SET_TOKEN]
    assert len(racks) == 64
    expected = {
        "baseProvider": "azure-native",
        "baseProviderVersion": compute_package.BASE_PROVIDER_VERSION,
        "downloadUrl": "",
        "name": compute_package.PACKAGE_NAME,
        "version": compute_package.PACKAGE_VERSION,
        "parameter": base64.b64encode(compute_package.PARAMETER.encode()).decode(),
    }
    assert all(r.package == expected for r in racks)
    (provider,) = [r for r in reference_plan.resources if r.type == f"pulumi:providers:{compute_package.PACKAGE_NAME}"]
    assert provider.package == expected
    assert all(r.provider and r.provider.startswith(provider.urn) for r in racks)
    # No other resource belongs to a parameterized package, and no Python dynamic resource is left.
    assert {r.type for r in reference_plan.resources if r.package} == {racks[0].type, provider.type}
    assert not [r for r in reference_plan.resources if r.type == inventory.LEGACY_DYNAMIC]


def test_a_rack_is_one_subtree(reference_plan: PlanResult) -> None:
    """Each rack is a ``gb300:compute:Rack`` whose children are its scale set and its logs association."""
    racks = {r.urn: r for r in reference_plan.resources if r.type == "gb300:compute:Rack"}
    assert len(racks) == 64
    children: dict[str, set[str]] = {urn: set() for urn in racks}
    for r in reference_plan.resources:
        if r.parent in children:
            children[r.parent].add(r.type)
    assert set(map(frozenset, children.values())) == {
        frozenset({compute_package.SCALE_SET_TOKEN, "azure-native:monitor:DataCollectionRuleAssociation"})
    }


def test_racks_carry_timeouts_and_replace_before_create(reference_plan: PlanResult) -> None:
    """Rack scale sets wait up to the documented timeouts and, on a replacement, go before their successor (Azure
    names are fixed), with the inputs Azure fixes at creation marked for replacement."""
    for r in reference_plan.resources:
        if r.type == compute_package.SCALE_SET_TOKEN:
            assert r.custom_timeouts == {"create": "90m", "update": "90m", "delete": "60m"}
            assert r.delete_before_replace
            assert set(compute_package.SCALE_SET_REPLACE_ON_CHANGES) <= set(r.replace_on_changes)


def test_the_provider_takes_the_stacks_azure_native_settings() -> None:
    """The package's provider is built from the azure-native:* settings a stack gives, secrets included."""
    import pulumi  # noqa: PLC0415

    pulumi.runtime.set_all_config(
        {
            "azure-native:subscriptionId": "sub-1",
            "azure-native:environment": "usgovernment",
            "azure-native:useOidc": "true",
            "azure-native:clientSecret": "s3cret",
        },
        ["azure-native:clientSecret"],
    )
    try:
        settings = compute_package.provider_settings(pulumi.Config("azure-native"))
    finally:
        pulumi.runtime.set_all_config({})
    assert {k: v for k, v in settings.items() if isinstance(v, str)} == {
        "subscriptionId": "sub-1",
        "environment": "usgovernment",
        "useOidc": "true",
    }
    assert isinstance(settings["clientSecret"], pulumi.Output)


def test_the_ci_job_checks_the_constants_against_the_real_plugin() -> None:
    """The GitHub workflow asks the real plugin for the package's schema and runs the check on the plan."""
    workflow = (paths.REPO_ROOT / ".github" / "workflows" / "pr.yml").read_text()
    assert 'pulumi package get-schema "azure-native@$version" compute v20260301' in workflow
    assert "s/^pulumi_azure_native==//p' constraints.txt" in workflow
    assert "scripts/check-compute-package" in workflow
    assert (paths.REPO_ROOT / "scripts" / "check-compute-package").is_file()
