"""gb300's dynamic compute resources (rack scale sets, interconnect blocks): the provider drives the real
``azure-mgmt-compute`` client over azure-core's RequestsTransport, whose requests session is a fake Azure that
keeps resources by path and answers PUT, GET and DELETE as ARM does (long-running operations included)."""

from __future__ import annotations

import base64
import copy
import io
import json
import time
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import requests
import urllib3
from azure.core.credentials import AccessToken, AccessTokenInfo
from azure.core.pipeline.transport import RequestsTransport
from azure.mgmt.compute import ComputeManagementClient

from gb300 import compute_resource, config, paths
from gb300.azure import inventory
from gb300.compute_resource import ComputeProvider
from gb300.plan import PlanResult, run_plan, runner
from gb300.plan.runner import ResourceRecord

SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"


class StaticCredential:
    """A token credential that hands out a fixed bearer token (no Entra ID call)."""

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("fake-token", int(time.time()) + 3600)

    def get_token_info(self, *scopes: str, options: Any = None) -> AccessTokenInfo:
        return AccessTokenInfo("fake-token", int(time.time()) + 3600)


def _response(request: requests.PreparedRequest, status: int, body: Any = None, **headers: str) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response.reason = {200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 404: "Not Found"}[status]
    content = b"" if body is None else json.dumps(body).encode()
    response._content = content
    response.raw = urllib3.HTTPResponse(body=io.BytesIO(content), status=status, preload_content=False)
    response.headers["Content-Type"] = "application/json; charset=utf-8"
    response.headers["x-ms-request-id"] = "00000000-0000-0000-0000-000000000001"
    response.headers["Retry-After"] = "0"
    response.headers.update(headers)
    response.url = request.url or ""
    response.request = request
    return response


class FakeArm(requests.adapters.BaseAdapter):
    """Azure Resource Manager for one subscription: PUT answers 201 and an async operation to poll, DELETE answers
    202 and a Location to poll, GET reads what is stored (404 when absent)."""

    def __init__(self) -> None:
        super().__init__()
        self.resources: dict[str, dict[str, Any]] = {}
        self.log: list[tuple[str, str, dict[str, list[str]]]] = []
        self.bodies: list[dict[str, Any]] = []

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:  # noqa: PLR0911
        url = urlparse(request.url or "")
        assert request.headers.get("Authorization") == "Bearer fake-token"
        self.log.append((request.method or "", url.path, parse_qs(url.query)))
        base = f"https://{url.netloc}"
        if url.path.startswith("/operations/"):
            return _response(request, 200, {"status": "Succeeded"})
        if url.path.startswith("/deleted/"):
            return _response(request, 204)
        if request.method == "PUT":
            body = json.loads(request.body or b"{}")
            self.bodies.append(body)
            stored = {**body, "id": url.path, "properties": {**body.get("properties", {})}}
            stored["properties"]["provisioningState"] = "Succeeded"
            self.resources[url.path.lower()] = stored
            return _response(
                request,
                201,
                {**stored, "properties": {**stored["properties"], "provisioningState": "Creating"}},
                **{"Azure-AsyncOperation": f"{base}/operations/put-1"},
            )
        if request.method == "GET":
            found = self.resources.get(url.path.lower())
            if found is None:
                return _response(request, 404, {"error": {"code": "ResourceNotFound", "message": url.path}})
            return _response(request, 200, found)
        if request.method == "DELETE":
            if self.resources.pop(url.path.lower(), None) is None:
                return _response(request, 204)
            return _response(request, 202, Location=f"{base}/deleted/1")
        raise AssertionError(f"unexpected {request.method} {url.path}")

    def close(self) -> None:
        pass


@pytest.fixture
def arm() -> FakeArm:
    """An empty fake ARM."""
    return FakeArm()


@pytest.fixture
def provider(arm: FakeArm) -> ComputeProvider:
    """The provider with its SDK client's HTTP transport pointed at the fake ARM."""
    session = requests.Session()
    session.mount("https://", arm)

    def client(subscription_id: str) -> ComputeManagementClient:
        transport = RequestsTransport(session=session, session_owner=False)
        return ComputeManagementClient(
            StaticCredential(), subscription_id, transport=transport, polling_interval=0, retry_total=0
        )

    return ComputeProvider(client_factory=client)


@pytest.fixture(scope="module")
def blocks_plan(dev_raw: dict[str, Any]) -> PlanResult:
    """The dev stack with interconnect blocks on."""
    raw = copy.deepcopy(dev_raw)
    raw["gpuPools"][0]["interconnectBlocks"] = True
    return run_plan("dev", raw)


def _rack(plan: PlanResult) -> ResourceRecord:
    return next(r for r in plan.resources if inventory.is_scale_set(r))


def _block(plan: PlanResult) -> ResourceRecord:
    return next(
        r for r in plan.resources if r.inputs.get(compute_resource.MARKER) == compute_resource.INTERCONNECT_BLOCK
    )


def test_create_puts_the_body_through_the_sdk_and_waits(
    dev_plan: PlanResult, provider: ComputeProvider, arm: FakeArm
) -> None:
    """Creating a rack PUTs exactly its ARM body at the pinned API version and waits for Azure to finish."""
    rack = _rack(dev_plan)
    result = provider.create(copy.deepcopy(rack.inputs))
    put = next(entry for entry in arm.log if entry[0] == "PUT")
    assert put[1] == rack.id
    assert put[2]["api-version"] == [rack.inputs["apiVersion"]]
    assert arm.bodies == [compute_resource.body(rack.inputs)]
    assert arm.bodies[0]["zones"] == ["1"]
    assert any(path.startswith("/operations/") for _, path, _ in arm.log)  # it polled the operation
    assert result.id == rack.id
    assert result.outs is not None
    assert result.outs[compute_resource.MARKER] == compute_resource.RACK_SCALE_SET
    assert result.outs["provisioningState"] == "Succeeded"
    assert compute_resource.body(result.outs) == compute_resource.body(rack.inputs)


def test_delete_removes_the_scale_set_and_waits(dev_plan: PlanResult, provider: ComputeProvider, arm: FakeArm) -> None:
    """Removing a rack deletes its scale set in Azure (DELETE, then polling until done); a refresh then finds
    it gone."""
    rack = _rack(dev_plan)
    provider.create(copy.deepcopy(rack.inputs))
    provider.delete(rack.id or "", copy.deepcopy(rack.inputs))
    methods = [(m, p) for m, p, _ in arm.log]
    assert ("DELETE", rack.id) in methods
    assert methods[-1][1].startswith("/deleted/")
    assert arm.resources == {}
    assert provider.read(rack.id or "", copy.deepcopy(rack.inputs)).id is None


def test_delete_of_a_missing_scale_set_succeeds(dev_plan: PlanResult, provider: ComputeProvider) -> None:
    """Deleting a scale set Azure no longer has is done, not an error."""
    rack = _rack(dev_plan)
    provider.delete(rack.id or "", copy.deepcopy(rack.inputs))


def test_interconnect_block_is_created_before_its_rack_references_it(
    blocks_plan: PlanResult, provider: ComputeProvider, arm: FakeArm
) -> None:
    """With interconnectBlocks on, the rack's block is a zonal Microsoft.Compute/interconnectBlocks the scale set
    names, and the provider creates it through the SDK's interconnect_blocks operations."""
    block = _block(blocks_plan)
    rack = _rack(blocks_plan)
    profile = rack.inputs["properties"]["virtualMachineProfile"]
    assert profile["interconnectBlockProfile"] == {"interconnectBlock": {"id": block.id}}
    group = profile["networkProfile"]["interconnectGroupProfile"]["interconnectGroup"]["id"]
    assert block.inputs["properties"] == {"interconnectGroup": {"id": group}}
    assert block.inputs["sku"] == {"name": rack.inputs["sku"]["name"], "capacity": rack.inputs["sku"]["capacity"]}
    assert block.inputs["zones"] == ["1"]
    result = provider.create(copy.deepcopy(block.inputs))
    assert result.id == block.id
    assert "/providers/Microsoft.Compute/interconnectBlocks/" in arm.log[0][1]


def _changed(inputs: dict[str, Any], *path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(inputs)
    target = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return out


@pytest.mark.parametrize(
    ("path", "value", "replaces"),
    [
        pytest.param(("zones",), ["2"], ["zones"], id="zone"),
        pytest.param(("sku", "name"), "Standard_ND128isr_NDR_GB200_v6", ["sku.name"], id="vm-size"),
        pytest.param(
            ("properties", "virtualMachineProfile", "networkProfile", "interconnectGroupProfile"),
            {"interconnectGroup": {"id": "/subscriptions/x/other"}},
            ["properties.virtualMachineProfile.networkProfile.interconnectGroupProfile"],
            id="interconnect-group",
        ),
        pytest.param(("location",), "westus3", ["location"], id="location"),
        pytest.param(("tags", "owner"), "someone-else", [], id="tag-in-place"),
        pytest.param(("sku", "capacity"), 17, [], id="capacity-in-place"),
        pytest.param(("properties", "virtualMachineProfile", "osProfile", "customData"), "Cg==", [], id="custom-data"),
    ],
)
def test_diff_replaces_what_azure_cannot_change_in_place(
    dev_plan: PlanResult, path: tuple[str, ...], value: Any, replaces: list[str]
) -> None:
    """A change to the zone, size, fabric or location replaces the rack (deleting first: names are fixed); tags,
    capacity and custom data update in place."""
    rack = _rack(dev_plan)
    olds = {**copy.deepcopy(rack.inputs), "id": rack.id, "provisioningState": "Succeeded"}
    result = ComputeProvider().diff(rack.id or "", olds, _changed(rack.inputs, *path, value=value))
    assert result.changes is True
    assert result.replaces == replaces
    assert result.delete_before_replace is True


def test_diff_without_change_is_no_change(dev_plan: PlanResult) -> None:
    """The same inputs again (outputs carry the id and provisioning state) are no change."""
    rack = _rack(dev_plan)
    olds = {**copy.deepcopy(rack.inputs), "id": rack.id, "provisioningState": "Succeeded"}
    result = ComputeProvider().diff(rack.id or "", olds, copy.deepcopy(rack.inputs))
    assert result.changes is False
    assert result.replaces == []


def test_pickled_provider_is_a_small_reference(dev_plan: PlanResult) -> None:
    """Each rack carries the provider as a reference to gb300's module (a few hundred bytes), not its code."""
    pickled = _rack(dev_plan).inputs["__provider"]
    assert len(pickled) < 512
    assert b"gb300.compute_resource" in base64.b64decode(pickled)


def test_every_rack_is_its_own_resource(reference_plan: PlanResult) -> None:
    """The reference stack's 64 racks are 64 dynamic resources, each zonal and in the pool's interconnect group."""
    racks = [r for r in reference_plan.resources if inventory.is_scale_set(r)]
    assert len(racks) == 64
    assert {r.type for r in racks} == {compute_resource.DYNAMIC_TYPE}
    groups = {
        r.inputs["properties"]["virtualMachineProfile"]["networkProfile"]["interconnectGroupProfile"][
            "interconnectGroup"
        ]["id"]
        for r in racks
    }
    (group,) = groups
    assert group in {r.id for r in reference_plan.resources if r.type == "azure-native:network:InterconnectGroup"}
    assert all(r.inputs["zones"] == ["1"] for r in racks)


def test_more_racks_than_the_pickler_nesting_limit_register() -> None:
    """1,200 dynamic resources register (the SDK's provider pickling nests a wrapper per resource unless undone:
    past about 960 the program died with RecursionError)."""

    def program() -> None:
        for index in range(1, 1201):
            compute_resource.ComputeResource(
                f"r{index}",
                kind=compute_resource.RACK_SCALE_SET,
                api_version="2026-04-01",
                subscription_id=SUBSCRIPTION,
                resource_group_name="rg",
                resource_name=f"r{index}",
                arm_body={"location": "eastus2", "sku": {"name": "Standard_ND128isr_GB300_v6", "capacity": 18}},
            )

    records = runner.register("dev", {}, program=program)
    assert len([r for r in records if r.type == compute_resource.DYNAMIC_TYPE]) == 1200


def test_registering_many_scale_sets_does_not_deepen_the_pickler() -> None:
    """Planning the 64-rack stack leaves pickle's batch writer wrapped at most once (no RecursionError later)."""
    import pickle  # noqa: PLC0415

    from gb300.plan.runner import register  # noqa: PLC0415

    register("reference", config.load_stack_file(paths.stack_file("reference")))
    depth, fn = 0, pickle._Pickler._batch_setitems  # type: ignore[attr-defined]
    while fn.__closure__ and depth < 10_000:
        cells = [c.cell_contents for c in fn.__closure__ if callable(c.cell_contents)]
        if not cells:
            break
        fn, depth = cells[0], depth + 1
    assert depth <= 1


def test_every_rack_carries_the_provider_the_sdk_would_pickle(reference_plan: PlanResult) -> None:
    """Each rack's ``__provider`` is exactly what ``pulumi.dynamic`` pickles for the provider, and it unpickles to a
    working :class:`ComputeProvider` (pickled once per process, not once per rack)."""
    import dill  # type: ignore[import-untyped]  # noqa: PLC0415 - what pulumi.dynamic's provider host unpickles with
    import pulumi.dynamic.dynamic as sdk_dynamic  # noqa: PLC0415

    racks = [r for r in reference_plan.resources if inventory.is_scale_set(r)]
    expected = sdk_dynamic.serialize_provider(ComputeProvider())
    assert {r.inputs["__provider"] for r in racks} == {expected}
    restored = dill.loads(base64.b64decode(expected))  # noqa: S301 - our own pickle, made just above
    assert isinstance(restored, ComputeProvider)
