"""The azure-native double (tests/support/azure_native_double) over its gRPC protocol, as the engine calls it: the
plugin handshake of its executable, Parameterize for the racks' package, Check against Azure's models, ids and
records, drift, and ARM's faults."""

from __future__ import annotations

import base64
import copy
import os
import subprocess
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2
from google.rpc import status_pb2
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from gb300.components import compute_package
from gb300.plan import PlanResult
from tests.support.azure_native_double import BIN, DIR_ENV, Fault, Ledger
from tests.support.azure_native_double.provider import AzureNativeDouble, to_dict, to_struct

SUBSCRIPTION = "5f1c0a2e-0000-4000-8000-000000000001"
STACK = "urn:pulumi:dev::gb300::"


class Double:
    """A double served in this process on a local port, and a client stub of the engine's side."""

    def __init__(self, root: Path) -> None:
        self.ledger = Ledger(root)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        provider_pb2_grpc.add_ResourceProviderServicer_to_server(AzureNativeDouble(self.ledger), self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = provider_pb2_grpc.ResourceProviderStub(self.channel)

    def configure(self) -> None:
        self.stub.Configure(
            provider_pb2.ConfigureRequest(
                variables={"azure-native:config:subscriptionId": SUBSCRIPTION},
                sends_old_inputs=True,
                sends_old_inputs_to_delete=True,
            )
        )

    def parameterize(self) -> provider_pb2.ParameterizeResponse:
        value = base64.b64decode(compute_package.BASE64_PARAMETER)  # the bytes the SDK sends (settings.py)
        request = provider_pb2.ParameterizeRequest(
            value=provider_pb2.ParameterizeRequest.ParametersValue(
                name=compute_package.PACKAGE_NAME, version=compute_package.PACKAGE_VERSION, value=value
            )
        )
        return self.stub.Parameterize(request)

    def create(self, urn: str, inputs: dict[str, Any]) -> provider_pb2.CreateResponse:
        return self.stub.Create(provider_pb2.CreateRequest(urn=urn, properties=to_struct(inputs)))

    def close(self) -> None:
        self.channel.close()
        self.server.stop(0)


@pytest.fixture
def double(tmp_path: Path) -> Iterator[Double]:
    served = Double(tmp_path / "azure")
    served.configure()
    yield served
    served.close()


@pytest.fixture
def rack_double(tmp_path: Path) -> Iterator[Double]:
    served = Double(tmp_path / "azure")
    served.parameterize()
    served.configure()
    yield served
    served.close()


def _rack(plan: PlanResult) -> tuple[str, dict[str, Any]]:
    rack = next(r for r in plan.resources if r.type == compute_package.SCALE_SET_TOKEN)
    return rack.urn, copy.deepcopy(rack.inputs)


RG_URN = f"{STACK}azure-native:resources:ResourceGroup::dev-rg"
RG = {"resourceGroupName": "dev-rg", "location": "eastus2", "tags": {"env": "dev"}}


def test_the_executable_prints_its_port_and_reports_azure_natives_version(tmp_path: Path) -> None:
    """Started as the engine starts a plugin (its address as the argument), the shim prints a port on which the
    double answers GetPluginInfo with azure-native's pinned version."""
    env = {**os.environ, DIR_ENV: str(tmp_path)}
    with subprocess.Popen(
        [str(BIN / "pulumi-resource-azure-native"), "127.0.0.1:1"], stdout=subprocess.PIPE, env=env, text=True
    ) as plugin:
        try:
            assert plugin.stdout is not None
            port = int(plugin.stdout.readline())
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                info = provider_pb2_grpc.ResourceProviderStub(channel).GetPluginInfo(empty_pb2.Empty(), timeout=30)
        finally:
            plugin.terminate()
    assert info.version == "3.29.0"


def test_parameterize_names_the_racks_package(tmp_path: Path) -> None:
    """The value gb300's compute package embeds parameterizes the double into azure-native_compute_v20260301."""
    served = Double(tmp_path)
    try:
        answer = served.parameterize()
    finally:
        served.close()
    assert (answer.name, answer.version) == (compute_package.PACKAGE_NAME, "3.29.0")


def test_a_rack_body_azure_refuses_fails_check_naming_the_key(rack_double: Double, dev_plan: PlanResult) -> None:
    """A rack whose orchestration mode Azure's model does not know fails Check with a failure naming that key."""
    urn, inputs = _rack(dev_plan)
    good = rack_double.stub.Check(provider_pb2.CheckRequest(urn=urn, news=to_struct(inputs)))
    inputs["orchestrationMode"] = "Uniformly"
    bad = rack_double.stub.Check(provider_pb2.CheckRequest(urn=urn, news=to_struct(inputs)))
    assert list(good.failures) == []
    assert [f.property for f in bad.failures] == ["properties.orchestrationMode"]
    assert "'Uniformly' is not a value" in bad.failures[0].reason


def test_a_type_of_another_package_is_refused(double: Double, dev_plan: PlanResult) -> None:
    """The unparameterized plugin refuses the racks' package type, as azure-native refuses a type it lacks."""
    urn, inputs = _rack(dev_plan)
    with pytest.raises(grpc.RpcError, match="not found"):
        double.stub.Check(provider_pb2.CheckRequest(urn=urn, news=to_struct(inputs)))


def test_create_read_delete_keep_an_azure_shaped_record(double: Double) -> None:
    """Create answers the resource group's Azure id under the configured subscription; Read returns it; after
    Delete, Read answers an empty id (the resource is gone)."""
    created = double.create(RG_URN, RG)
    assert created.id == f"/subscriptions/{SUBSCRIPTION}/resourceGroups/dev-rg"
    read = double.stub.Read(provider_pb2.ReadRequest(id=created.id, urn=RG_URN, properties=created.properties))
    assert to_dict(read.properties)["tags"] == {"env": "dev"}
    double.stub.Delete(provider_pb2.DeleteRequest(id=created.id, urn=RG_URN, properties=created.properties))
    gone = double.stub.Read(provider_pb2.ReadRequest(id=created.id, urn=RG_URN, properties=created.properties))
    assert gone.id == ""


def test_a_nested_resource_gets_its_parents_path(double: Double) -> None:
    """A subnet's id hangs under its virtual network, in the resource group."""
    urn = f"{STACK}azure-native:network:Subnet::dev-gpu"
    inputs = {"resourceGroupName": "dev-rg", "virtualNetworkName": "dev-vnet", "subnetName": "gpu"}
    created = double.create(urn, {**inputs, "addressPrefix": "10.41.0.0/24"})
    assert created.id == (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/dev-rg/providers/Microsoft.Network/virtualNetworks/dev-vnet"
        "/subnets/gpu"
    )


def test_create_refuses_a_resource_that_already_exists(double: Double) -> None:
    """A resource already in the subscription is not taken over by Create (it must be imported)."""
    double.create(RG_URN, RG)
    with pytest.raises(grpc.RpcError, match="cannot create already existing resource"):
        double.create(RG_URN, RG)


def test_drift_staged_in_the_record_is_what_read_returns(double: Double) -> None:
    """A tag changed outside Pulumi (in the double's record) comes back from Read in the outputs and the inputs."""
    created = double.create(RG_URN, RG)
    arm_id, entry = double.ledger.find("::dev-rg")
    entry["outputs"]["tags"] = {"env": "prod"}
    double.ledger.put(arm_id, entry)
    read = double.stub.Read(
        provider_pb2.ReadRequest(id=created.id, urn=RG_URN, properties=created.properties, inputs=to_struct(RG))
    )
    assert to_dict(read.properties)["tags"] == {"env": "prod"}
    assert to_dict(read.inputs)["tags"] == {"env": "prod"}


def test_import_reads_every_property_as_an_input(double: Double) -> None:
    """A resource that exists before Pulumi knows it is read on import with every property Azure holds as an
    input, over the import file's own."""
    arm_id = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/old-rg"
    held = {**RG, "resourceGroupName": "old-rg", "managedBy": "someone"}
    double.ledger.put(
        arm_id, {"type": "azure-native:resources:ResourceGroup", "urn": "", "inputs": held, "outputs": held}
    )
    read = double.stub.Read(provider_pb2.ReadRequest(id=arm_id, urn=RG_URN, inputs=to_struct({"location": "eastus2"})))
    assert to_dict(read.inputs)["managedBy"] == "someone"


def test_write_only_properties_are_never_answered(rack_double: Double, dev_plan: PlanResult) -> None:
    """A rack's custom data goes into Azure's record but, as with ARM's GET, comes back neither in Create's nor in
    Read's outputs, nor as an input when the scale set is imported; the rest of its profile does."""
    urn, inputs = _rack(dev_plan)
    assert inputs["virtualMachineProfile"]["osProfile"]["customData"]  # the plan gives the rack custom data
    created = rack_double.create(urn, inputs)
    read = rack_double.stub.Read(provider_pb2.ReadRequest(id=created.id, urn=urn, properties=created.properties))
    imported = rack_double.stub.Read(provider_pb2.ReadRequest(id=created.id, urn=urn))
    for answer in (to_dict(created.properties), to_dict(read.properties), to_dict(imported.inputs)):
        profile = answer["virtualMachineProfile"]["osProfile"]
        assert "customData" not in profile
        assert profile["adminUsername"] == inputs["virtualMachineProfile"]["osProfile"]["adminUsername"]
    assert rack_double.ledger.get(created.id)["inputs"] == inputs  # type: ignore[index]


def test_a_key_vault_secrets_value_is_not_an_output(double: Double) -> None:
    """A Key Vault secret's value is written and never read back: its outputs hold its content type only."""
    urn = f"{STACK}azure-native:keyvault:Secret::dev-munge"
    inputs = {
        "resourceGroupName": "dev-rg",
        "vaultName": "dev-kv",
        "secretName": "munge",
        "properties": {"value": "c2VjcmV0", "contentType": "application/base64"},
    }
    created = double.create(urn, inputs)
    assert to_dict(created.properties)["properties"] == {"contentType": "application/base64"}
    assert inputs["properties"]["value"] == "c2VjcmV0"  # the caller's inputs are not changed


@pytest.mark.parametrize(
    ("change", "replaces"),
    [
        pytest.param({"tags": {"env": "prod"}}, [], id="tags-update-in-place"),
        pytest.param({"location": "East US 2"}, None, id="location-case-is-no-change"),
        pytest.param({"location": "westus3"}, ["location"], id="location-replaces"),
        pytest.param({"resourceGroupName": "other-rg"}, ["resourceGroupName"], id="path-replaces"),
    ],
)
def test_diff_replaces_on_path_and_force_new_properties(
    double: Double, change: dict[str, Any], replaces: list[str] | None
) -> None:
    """A new tag updates in place; a location written differently is no change; a new location or resource group
    name replaces, deleting first."""
    request = provider_pb2.DiffRequest(
        urn=RG_URN, old_inputs=to_struct(RG), olds=to_struct(RG), news=to_struct({**RG, **change})
    )
    answer = double.stub.Diff(request)
    if replaces is None:
        assert answer.changes == provider_pb2.DiffResponse.DIFF_NONE
        return
    assert answer.changes == provider_pb2.DiffResponse.DIFF_SOME
    assert list(answer.replaces) == replaces
    assert answer.deleteBeforeReplace == bool(replaces)


def test_a_rack_zone_change_replaces_the_rack(rack_double: Double, dev_plan: PlanResult) -> None:
    """A rack moved to another resource group is a new rack: Diff replaces it."""
    urn, inputs = _rack(dev_plan)
    news = {**inputs, "resourceGroupName": "dev-rg2"}
    answer = rack_double.stub.Diff(
        provider_pb2.DiffRequest(urn=urn, old_inputs=to_struct(inputs), olds=to_struct(inputs), news=to_struct(news))
    )
    assert list(answer.replaces) == ["resourceGroupName"]


def test_a_conflict_fails_create_as_arm_answers_it(double: Double) -> None:
    """A 409 queued for the resource group fails its Create with ARM's status and code; nothing is recorded."""
    double.ledger.add_fault(Fault(method="Create", kind="conflict", match="::dev-rg"))
    with pytest.raises(grpc.RpcError) as failed:
        double.create(RG_URN, RG)
    assert "RESPONSE 409" in str(failed.value.details())
    assert "ERROR CODE: Conflict" in str(failed.value.details())
    assert double.ledger.resources() == {}


def test_throttling_is_waited_out_up_to_azcores_retries(double: Double) -> None:
    """Two 429s with Retry-After are waited out and the Create succeeds; four exhaust the retries and fail it."""
    double.ledger.add_fault(Fault(method="Create", kind="throttled", match="::dev-rg", times=2, retry_after=0.2))
    started = time.monotonic()
    created = double.create(RG_URN, RG)
    assert created.id
    assert time.monotonic() - started >= 0.4
    urn = f"{STACK}azure-native:resources:ResourceGroup::dev2-rg"
    double.ledger.add_fault(Fault(method="Create", kind="throttled", match="::dev2-rg", times=4, retry_after=0.01))
    with pytest.raises(grpc.RpcError, match="RESPONSE 429"):
        double.create(urn, {**RG, "resourceGroupName": "dev2-rg"})


def test_a_failed_long_running_operation_leaves_a_failed_resource(double: Double) -> None:
    """A PUT whose operation ends Failed fails Create with the error code, and tells the engine the resource
    exists (ErrorResourceInitFailed with its id), in provisioning state Failed."""
    double.ledger.add_fault(Fault(method="Create", kind="lro-failed", match="::dev-rg", code="AllocationFailed"))
    with pytest.raises(grpc.RpcError) as failed:
        double.create(RG_URN, RG)
    assert "ERROR CODE: AllocationFailed" in str(failed.value.details())
    trailers = dict(failed.value.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    init = provider_pb2.ErrorResourceInitFailed()
    assert status.details[0].Unpack(init)
    assert init.id.endswith("/resourceGroups/dev-rg")
    assert to_dict(init.properties)["provisioningState"] == "Failed"
    assert double.ledger.get(init.id) is not None


def test_get_client_config_answers_the_configured_subscription(double: Double) -> None:
    """The deployer's client config carries the subscription the provider was configured with."""
    answer = double.stub.Invoke(provider_pb2.InvokeRequest(tok="azure-native:authorization:getClientConfig"))
    assert to_dict(getattr(answer, "return"))["subscriptionId"] == SUBSCRIPTION
