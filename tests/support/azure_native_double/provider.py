"""The gRPC ``ResourceProvider`` service of the azure-native double (see the package docstring for what it is and
what it cannot show). Each method follows pulumi/pulumi-azure-native ``provider/pkg/provider/provider.go`` where it
matters to the engine: what Configure demands and answers, what Check returns, how Diff decides replacement, that
Create refuses a resource that already exists, that Read answers an empty id for a resource that is gone and, on
import, returns the resource's whole body as inputs.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import time
import uuid
from collections.abc import Mapping
from typing import Any

import grpc
from google.protobuf import any_pb2, empty_pb2, json_format, struct_pb2
from google.rpc import status_pb2
from pulumi.runtime.proto import plugin_pb2, provider_pb2, provider_pb2_grpc

from gb300.azure import contract
from gb300.plan import mocks
from gb300.resources import ResourceRecord
from tests.support.azure_native_double import diff
from tests.support.azure_native_double.ledger import Fault, Ledger

NAME = "azure-native"
VERSION = "3.29.0"  # constraints.txt's pulumi_azure_native: the plugin version the program's SDK asks for
SECRET_SIG = "4dabf18193072939515e22adb298388d"  # noqa: S105 - pulumi sdk rpc.py _special_sig_key, not a secret
SECRET_VALUE = "1b47061264138c4ac30d75fd1eb44270"  # noqa: S105 - rpc.py _special_secret_sig
AZCORE_MAX_RETRIES = 3  # azure-sdk-for-go azcore policy.RetryOptions: MaxRetries defaults to 3
_RULE = "-" * 80


def to_dict(struct: struct_pb2.Struct | None) -> dict[str, Any]:
    """A protobuf Struct as plain data, secrets unwrapped (the engine marks outputs of secret inputs itself)."""
    if struct is None:
        return {}
    return dict(_unwrap(json_format.MessageToDict(struct)))


def _unwrap(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get(SECRET_SIG) == SECRET_VALUE:
            return _unwrap(value.get("value"))
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value


def to_struct(value: Mapping[str, Any]) -> struct_pb2.Struct:
    """Plain data as a protobuf Struct (nulls dropped, as the provider marshals with ``SkipNulls``)."""
    out = struct_pb2.Struct()
    out.update({k: v for k, v in value.items() if v is not None})
    return out


def _known(value: Any) -> Any:
    """``value`` with every unknown (a preview's not-yet-computed input) left out, for the model check."""
    if value == diff.UNKNOWN:
        return None
    if isinstance(value, dict):
        return {k: _known(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_known(v) for v in value]
    return value


def _urn_name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _urn_type(urn: str) -> str:
    return urn.split("::")[2].rsplit("$", 1)[-1]


def arm_error(method: str, arm_id: str, status: int, code: str, message: str) -> str:
    """An ARM error as azure-sdk-for-go's ``azcore.ResponseError`` prints it (what azure-native passes on)."""
    body = json.dumps({"error": {"code": code, "message": message}}, indent=2)
    reason = {409: "Conflict", 429: "Too Many Requests", 200: "OK"}.get(status, "")
    return (
        f"{method} https://management.azure.com{arm_id}\n{_RULE}\nRESPONSE {status}: {status} {reason}\n"
        f"ERROR CODE: {code}\n{_RULE}\n{body}\n{_RULE}\n"
    )


class ArmError(Exception):
    """A call the double answers with an error (``details``: the engine's partial-failure record, if any)."""

    def __init__(self, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.details = details


class AzureNativeDouble(provider_pb2_grpc.ResourceProviderServicer):
    """azure-native 3.29.0, or one parameterized package of it, answering from a :class:`Ledger`."""

    def __init__(self, ledger: Ledger | None = None) -> None:
        self.ledger = ledger if ledger is not None else Ledger()
        self.package = NAME  # azure-native_<module>_<version> once parameterized
        self.config: dict[str, str] = {}
        self.subscription = ""

    # --- plumbing ---

    def _fail(self, context: grpc.ServicerContext, exc: ArmError) -> Any:
        status = status_pb2.Status(code=grpc.StatusCode.UNKNOWN.value[0], message=str(exc))
        if exc.details is not None:
            detail = any_pb2.Any()
            detail.Pack(exc.details)
            status.details.append(detail)
            context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
        context.abort(grpc.StatusCode.UNKNOWN, str(exc))

    def token(self, urn_type: str) -> str:
        """The azure-native token (``azure-native:<module>:<Resource>``) of a type of this package."""
        package, module, resource = urn_type.split(":")
        if package != self.package:
            raise ArmError(f"Resource type {urn_type} not found")
        return f"{NAME}:{module.split('/')[0]}:{resource}"

    def info(self, urn: str) -> diff.TypeInfo:
        """What the double knows of the URN's type; an unknown type is refused as the provider refuses it."""
        urn_type = _urn_type(urn)
        found = diff.table().get(self.token(urn_type))
        if found is None:
            raise ArmError(f"Resource type {urn_type} not found")
        return found

    def arm_id(self, urn: str, inputs: Mapping[str, Any]) -> str:
        """The Azure id of a resource: the plan's id shapes, under the configured subscription."""
        found = mocks.arm_id(self.token(_urn_type(urn)), _urn_name(urn), dict(inputs))
        return found.replace(f"/subscriptions/{mocks.SUBSCRIPTION_ID}", f"/subscriptions/{self.subscription}")

    def outputs(self, urn: str, info: diff.TypeInfo, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """What ARM's GET answers for a resource created from ``inputs`` (azure-native reads the resource after
        every write and keeps that as its outputs): the inputs less the write-only properties ARM never returns
        (a scale set's or VM's ``osProfile.customData``, a Key Vault secret's value), its name and type, what Azure
        computes (principal ids, endpoints), and a provisioning state."""
        token = self.token(_urn_type(urn))
        name = mocks.azure_name(token, _urn_name(urn), dict(inputs))
        out = {**diff.without_write_only(info, inputs), "name": name, "type": info.arm_type}
        out["provisioningState"] = "Succeeded"
        out.update(mocks.computed_outputs(token, _urn_name(urn), dict(inputs)))
        if contract.PACKAGE_MODELS.get(_urn_type(urn)) is not None:
            out["azureApiVersion"] = contract.compute_package.API_VERSION
        return out

    def _fault(self, method: str, urn: str, arm_id: str, verb: str) -> Fault | None:
        """Apply a queued fault to this call: raise for 409 and exhausted 429s, sleep through retried 429s;
        return an ``lro-failed`` fault for the caller to finish."""
        attempts = 0
        while (fault := self.ledger.take_fault(method, urn)) is not None:
            self.ledger.log(method=method, urn=urn, id=arm_id, fault=fault.kind)
            if fault.kind == "conflict":
                message = fault.message or f"Another operation is in progress on {arm_id}."
                raise ArmError(arm_error(verb, arm_id, 409, fault.code or "Conflict", message))
            if fault.kind == "throttled":
                attempts += 1
                if attempts > AZCORE_MAX_RETRIES:
                    message = fault.message or "The request is being throttled."
                    raise ArmError(arm_error(verb, arm_id, 429, fault.code or "TooManyRequests", message))
                time.sleep(fault.retry_after)  # azcore honours Retry-After before it retries
                continue
            return fault
        return None

    # --- the plugin ---

    def GetPluginInfo(self, request: empty_pb2.Empty, context: grpc.ServicerContext) -> Any:
        return plugin_pb2.PluginInfo(version=VERSION)

    def Parameterize(self, request: Any, context: grpc.ServicerContext) -> Any:
        """provider_parameterize.go: two arguments ``[module, version]`` from a command line, or the SDK's
        embedded value, base64 text of ``{"module": ..., "version": ...}``; the package is
        ``azure-native_<module>_<version>``."""
        try:
            if request.WhichOneof("parameters") == "args":
                args = list(request.args.args)
                if len(args) != 2:
                    raise ArmError(f"expected 2 arguments (module and API version), got {len(args)}")
                module, version = args
            else:
                parsed = json.loads(base64.b64decode(request.value.value, validate=True))
                module, version = parsed["module"], parsed["version"]
        except (binascii.Error, ValueError, KeyError) as exc:
            return self._fail(context, ArmError(f"failed to deserialize parameterize args: {exc}"))
        except ArmError as exc:
            return self._fail(context, exc)
        if not version.startswith("v"):
            version = "v" + version.replace("-", "")
        self.package = f"{NAME}_{module}_{version}"
        self.ledger.log(method="Parameterize", package=self.package)
        return provider_pb2.ParameterizeResponse(name=self.package, version=VERSION)

    def GetSchema(self, request: Any, context: grpc.ServicerContext) -> Any:
        """A schema naming the package's resources, with no properties: enough for the engine to know the
        package, not for code generation from it."""
        module_of = {t: t.split(":")[1] for t in diff.table()}
        resources = {
            f"{self.package}:{module_of[t]}:{t.split(':')[2]}": {"inputProperties": {}, "properties": {}}
            for t in diff.table()
        }
        schema = {"name": self.package, "version": VERSION, "resources": resources, "config": {}}
        return provider_pb2.GetSchemaResponse(schema=json.dumps(schema))

    def CheckConfig(self, request: Any, context: grpc.ServicerContext) -> Any:
        return provider_pb2.CheckResponse(inputs=request.news)

    def DiffConfig(self, request: Any, context: grpc.ServicerContext) -> Any:
        return provider_pb2.DiffResponse(changes=provider_pb2.DiffResponse.DIFF_UNKNOWN)

    def Configure(self, request: Any, context: grpc.ServicerContext) -> Any:
        """The provider's settings, as ``<package>:config:<key>`` variables; the subscription from them or from
        ``ARM_SUBSCRIPTION_ID``/``AZURE_SUBSCRIPTION_ID``, as azure-native's sign-in reads it."""
        if not (request.sends_old_inputs and request.sends_old_inputs_to_delete):
            return self._fail(context, ArmError("Azure Native provider requires Pulumi CLI v3.74.0 or later"))
        for key, value in request.variables.items():
            self.config[key.split(":config:", 1)[-1]] = value
        self.config.update({k: str(v) for k, v in to_dict(request.args).items() if k != "version"})
        env = os.environ.get("ARM_SUBSCRIPTION_ID") or os.environ.get("AZURE_SUBSCRIPTION_ID", "")
        self.subscription = self.config.get("subscriptionId") or env
        if not self.subscription:
            return self._fail(
                context, ArmError("subscription ID not set: azure-native:subscriptionId or ARM_SUBSCRIPTION_ID")
            )
        self.ledger.log(method="Configure", package=self.package, config=sorted(self.config))
        return provider_pb2.ConfigureResponse(supportsPreview=True, acceptSecrets=False, acceptResources=False)

    def Invoke(self, request: Any, context: grpc.ServicerContext) -> Any:
        """The functions gb300's program calls: the deployer's identity and Lustre's subnet size."""
        args = to_dict(request.args)
        self.ledger.log(method="Invoke", token=request.tok)
        if request.tok == "azure-native:authorization:getClientConfig":
            tenant = self.config.get("tenantId") or os.environ.get("ARM_TENANT_ID", mocks.TENANT_ID)
            client = self.config.get("clientId") or os.environ.get(
                "ARM_CLIENT_ID", str(uuid.uuid5(uuid.NAMESPACE_URL, "client"))
            )
            found = {
                "clientId": client,
                "objectId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"object/{client}")),
                "subscriptionId": self.subscription,
                "tenantId": tenant,
            }
        elif request.tok == "azure-native:storagecache:getRequiredAmlFSSubnetsSize":
            found = {"filesystemSubnetSize": mocks.amlfs_subnet_addresses(float(args.get("storageCapacityTiB", 0)))}
        else:
            return self._fail(context, ArmError(f"Invoke type {request.tok} not found"))
        return provider_pb2.InvokeResponse(**{"return": to_struct(found)})

    # --- resources ---

    def Check(self, request: Any, context: grpc.ServicerContext) -> Any:
        """The inputs as given; a failure naming the key path for every key Azure's SDK models refuse."""
        news = to_dict(request.news)
        try:
            self.info(request.urn)
        except ArmError as exc:
            return self._fail(context, exc)
        record = ResourceRecord(
            request.urn, _urn_type(request.urn), _urn_name(request.urn), None, False, None, _known(news)
        )
        failures = [
            provider_pb2.CheckFailure(property=v.path, reason=f"{v.path}: {v.problem}")
            for v in contract.violations([record])
        ]
        return provider_pb2.CheckResponse(inputs=request.news, failures=failures)

    def Diff(self, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            info = self.info(request.urn)
        except ArmError as exc:
            return self._fail(context, exc)
        olds = to_dict(request.old_inputs) if request.HasField("old_inputs") else to_dict(request.olds)
        found = diff.detailed_diff(info, olds, to_dict(request.news))
        if not found:
            return provider_pb2.DiffResponse(changes=provider_pb2.DiffResponse.DIFF_NONE)
        replaces = diff.top_level(found, replacing=True)
        return provider_pb2.DiffResponse(
            changes=provider_pb2.DiffResponse.DIFF_SOME,
            replaces=replaces,
            deleteBeforeReplace=bool(replaces),
            diffs=diff.top_level(found, replacing=False),
            detailedDiff={k: provider_pb2.PropertyDiff(kind=v, inputDiff=True) for k, v in found.items()},
            hasDetailedDiff=True,
        )

    def Create(self, request: Any, context: grpc.ServicerContext) -> Any:
        inputs = to_dict(request.properties)
        try:
            info = self.info(request.urn)
            if request.preview:
                return provider_pb2.CreateResponse(properties=to_struct(self.outputs(request.urn, info, inputs)))
            arm_id = self.arm_id(request.urn, inputs)
            if self.ledger.get(arm_id) is not None:
                raise ArmError(f'cannot create already existing resource "{arm_id}"')
            outputs = self.outputs(request.urn, info, inputs)
            failed = self._fault("Create", request.urn, arm_id, "PUT")
            self.ledger.log(method="Create", urn=request.urn, id=arm_id)
            if failed is not None:
                return self._failed_operation(request.urn, arm_id, inputs, outputs, failed)
            self.ledger.put(
                arm_id, {"type": _urn_type(request.urn), "urn": request.urn, "inputs": inputs, "outputs": outputs}
            )
        except ArmError as exc:
            return self._fail(context, exc)
        return provider_pb2.CreateResponse(id=arm_id, properties=to_struct(outputs))

    def _failed_operation(
        self, urn: str, arm_id: str, inputs: dict[str, Any], outputs: dict[str, Any], fault: Fault
    ) -> Any:
        """A PUT whose long-running operation ended Failed: the resource exists in state Failed, and the engine
        records it as created with an error (azure-native's HandleErrorWithCheckpoint)."""
        outputs = {**outputs, "provisioningState": "Failed"}
        self.ledger.put(arm_id, {"type": _urn_type(urn), "urn": urn, "inputs": inputs, "outputs": outputs})
        code = fault.code or "InternalExecutionError"
        message = arm_error("PUT", arm_id, 200, code, fault.message or "The operation failed.")
        details = provider_pb2.ErrorResourceInitFailed(
            id=arm_id, properties=to_struct(outputs), inputs=to_struct(inputs), reasons=[message]
        )
        raise ArmError(message, details)

    def Read(self, request: Any, context: grpc.ServicerContext) -> Any:
        """The recorded resource; an empty id when it is gone. On refresh the inputs take what changed in Azure
        (provider.go Read: old inputs with the difference of the old and new outputs applied); on import (no
        state) the inputs are every property a GET returns (write-only ones are not), over the import file's."""
        try:
            info = self.info(request.urn)
            self._fault("Read", request.urn, request.id, "GET")
        except ArmError as exc:
            return self._fail(context, exc)
        entry = self.ledger.get(request.id)
        self.ledger.log(method="Read", urn=request.urn, id=request.id, found=entry is not None)
        if entry is None:
            return provider_pb2.ReadResponse(id="")
        state, given = to_dict(request.properties), to_dict(request.inputs)
        if state:
            inputs = _apply_changes(given, state, entry["outputs"], set(entry["inputs"]) | set(given))
        else:  # azure-native's ResponseToSdkInputs: the GET's body as inputs, so no write-only property
            inputs = {**given, **diff.without_write_only(info, entry["inputs"])}
        return provider_pb2.ReadResponse(
            id=request.id, properties=to_struct(entry["outputs"]), inputs=to_struct(inputs)
        )

    def Update(self, request: Any, context: grpc.ServicerContext) -> Any:
        news = to_dict(request.news)
        try:
            info = self.info(request.urn)
            outputs = self.outputs(request.urn, info, news)
            if request.preview:
                return provider_pb2.UpdateResponse(properties=to_struct(outputs))
            failed = self._fault("Update", request.urn, request.id, "PUT")
            self.ledger.log(method="Update", urn=request.urn, id=request.id)
            if failed is not None:
                self._failed_operation(request.urn, request.id, news, outputs, failed)
            self.ledger.put(
                request.id, {"type": _urn_type(request.urn), "urn": request.urn, "inputs": news, "outputs": outputs}
            )
        except ArmError as exc:
            return self._fail(context, exc)
        return provider_pb2.UpdateResponse(properties=to_struct(outputs))

    def Delete(self, request: Any, context: grpc.ServicerContext) -> Any:
        """Forget the resource; one already gone is deleted (ARM's 404 on DELETE is success to azure-native)."""
        try:
            self.info(request.urn)
            failed = self._fault("Delete", request.urn, request.id, "DELETE")
            if failed is not None:
                message = fault_message(failed, request.id)
                raise ArmError(message)
        except ArmError as exc:
            return self._fail(context, exc)
        existed = self.ledger.remove(request.id)
        self.ledger.log(method="Delete", urn=request.urn, id=request.id, found=existed)
        return empty_pb2.Empty()

    def Cancel(self, request: Any, context: grpc.ServicerContext) -> Any:
        return empty_pb2.Empty()


def fault_message(fault: Fault, arm_id: str) -> str:
    """The error of a DELETE whose long-running operation failed."""
    return arm_error(
        "DELETE", arm_id, 200, fault.code or "InternalExecutionError", fault.message or "The operation failed."
    )


def _apply_changes(
    inputs: dict[str, Any], old: Mapping[str, Any], new: Mapping[str, Any], keys: set[str]
) -> dict[str, Any]:
    """``inputs`` with every input-shaped property that changed between the old and new outputs taken from the new
    ones, sub-property by sub-property (diff.go ``applyDiff``)."""
    out = dict(inputs)
    for key in keys:
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        if after is None:
            out.pop(key, None)
        elif isinstance(after, dict) and isinstance(before, dict) and isinstance(out.get(key), dict):
            out[key] = _apply_changes(out[key], before, after, set(before) | set(after))
        else:
            out[key] = after
    return out
