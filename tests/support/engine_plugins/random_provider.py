"""A double of ``pulumi-resource-random`` 4.21.4 (constraints.txt ``pulumi_random``) at the ResourceProvider gRPC
boundary: ``RandomString`` and ``RandomBytes``, the two resources of pulumi-random that gb300 declares (the vault's
name suffix and the munge key).

Why a double: the provider's Go module (``github.com/pulumi/pulumi-random/provider/v4``) is refused by the Go module
proxy (403 for every version), so the release cannot be built here. The engine starts this double as it starts the
release: ``pulumi-resource-random`` beside the CLI or on ``PATH``, with the engine's address as its argument, its
port read from stdout.

The behaviour is terraform-provider-random's, which pulumi-random bridges (``internal/provider/resource_string.go``,
``resource_bytes.go`` in hashicorp/terraform-provider-random): every input of both resources requires replacement
(``keepers`` included), so any change is a replacement; ``RandomString`` defaults ``upper``, ``lower``, ``numeric``
and ``special`` to true and its ``min*`` counts to 0, and its result is also its id; ``RandomBytes``'s ``base64`` and
``hex`` are sensitive, which the bridge returns as secrets. Read returns the state as it is (nothing outside Pulumi
holds a random value).

What it cannot show: the other resources (``RandomPassword``, ``RandomId``, ``RandomInteger``, ...: asked for, they
fail loudly), import of a random value by id, the bridge's exact check messages, and any change after 4.21.4.
"""

from __future__ import annotations

import base64
import secrets
import string
import sys
from concurrent import futures
from typing import Any

import grpc
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import plugin_pb2, provider_pb2, provider_pb2_grpc

VERSION = "4.21.4"
STRING = "random:index/randomString:RandomString"
BYTES = "random:index/randomBytes:RandomBytes"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
SIG = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"  # noqa: S105 - the protocol's secret marker, not a secret
STRING_DEFAULTS = {"upper": True, "lower": True, "numeric": True, "special": True}
MIN_COUNTS = ("minUpper", "minLower", "minNumeric", "minSpecial")
SPECIAL = "!@#$%&*()-_=+[]{}<>:?"  # terraform-provider-random's default special characters


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get(SIG) == SECRET_SIG:
            return _plain(value.get("value"))
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def to_dict(struct: struct_pb2.Struct) -> dict[str, Any]:
    return dict(_plain(json_format.MessageToDict(struct)))


def to_struct(value: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update({k: v for k, v in value.items() if v is not None})
    return out


def secret(value: Any) -> dict[str, Any]:
    return {SIG: SECRET_SIG, "value": value}


def _token(urn: str) -> str:
    return urn.split("::")[2].rsplit("$", 1)[-1]


def random_string(inputs: dict[str, Any]) -> str:
    """A string of ``length`` characters from the classes turned on, at least ``min*`` of each."""
    classes = {
        "upper": string.ascii_uppercase,
        "lower": string.ascii_lowercase,
        "numeric": string.digits,
        "special": inputs.get("overrideSpecial") or SPECIAL,
    }
    chosen = [
        secrets.choice(chars)
        for name, chars in classes.items()
        for _ in range(int(inputs.get(f"min{name.title()}", 0)))
    ]
    pool = "".join(chars for name, chars in classes.items() if inputs.get(name, True))
    chosen += [secrets.choice(pool) for _ in range(int(inputs["length"]) - len(chosen))]
    secrets.SystemRandom().shuffle(chosen)
    return "".join(chosen)


class RandomDouble(provider_pb2_grpc.ResourceProviderServicer):
    """pulumi-random's RandomString and RandomBytes."""

    def _known(self, urn: str, context: grpc.ServicerContext) -> str:
        token = _token(urn)
        if token not in (STRING, BYTES):
            context.abort(
                grpc.StatusCode.UNIMPLEMENTED, f"the random double serves {STRING} and {BYTES} only, not {token}"
            )
        return token

    def GetPluginInfo(self, request: Any, context: grpc.ServicerContext) -> Any:
        return plugin_pb2.PluginInfo(version=VERSION)

    def CheckConfig(self, request: Any, context: grpc.ServicerContext) -> Any:
        return provider_pb2.CheckResponse(inputs=request.news)

    def DiffConfig(self, request: Any, context: grpc.ServicerContext) -> Any:
        return provider_pb2.DiffResponse(changes=provider_pb2.DiffResponse.DIFF_UNKNOWN)

    def Configure(self, request: Any, context: grpc.ServicerContext) -> Any:
        return provider_pb2.ConfigureResponse(acceptSecrets=True, supportsPreview=True)

    def Check(self, request: Any, context: grpc.ServicerContext) -> Any:
        token = self._known(request.urn, context)
        news = to_dict(request.news)
        failures = []
        if "length" not in news:
            failures.append(provider_pb2.CheckFailure(property="length", reason="Missing required property 'length'"))
        if token == STRING:
            news = {**STRING_DEFAULTS, **dict.fromkeys(MIN_COUNTS, 0), **news}
        return provider_pb2.CheckResponse(inputs=to_struct(news), failures=failures)

    def Diff(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._known(request.urn, context)
        olds = to_dict(request.old_inputs) if request.HasField("old_inputs") else to_dict(request.olds)
        news = to_dict(request.news)
        changed = sorted(k for k in set(olds) | set(news) if olds.get(k) != news.get(k) or news.get(k) == UNKNOWN)
        if not changed:
            return provider_pb2.DiffResponse(changes=provider_pb2.DiffResponse.DIFF_NONE)
        return provider_pb2.DiffResponse(
            changes=provider_pb2.DiffResponse.DIFF_SOME,
            replaces=changed,
            diffs=changed,
            detailedDiff={k: provider_pb2.PropertyDiff(kind=provider_pb2.PropertyDiff.UPDATE_REPLACE) for k in changed},
            hasDetailedDiff=True,
        )

    def Create(self, request: Any, context: grpc.ServicerContext) -> Any:
        token = self._known(request.urn, context)
        inputs = to_dict(request.properties)
        if request.preview:
            return provider_pb2.CreateResponse(properties=to_struct(inputs))
        if token == STRING:
            result = random_string(inputs)
            return provider_pb2.CreateResponse(id=result, properties=to_struct({**inputs, "result": result}))
        data = secrets.token_bytes(int(inputs["length"]))
        outputs = {**inputs, "base64": secret(base64.b64encode(data).decode()), "hex": secret(data.hex())}
        return provider_pb2.CreateResponse(id="none", properties=to_struct(outputs))

    def Read(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._known(request.urn, context)
        return provider_pb2.ReadResponse(id=request.id, properties=request.properties, inputs=request.inputs)

    def Update(self, request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, "every input of a random resource replaces it")

    def Delete(self, request: Any, context: grpc.ServicerContext) -> Any:
        return empty_pb2.Empty()

    def Cancel(self, request: Any, context: grpc.ServicerContext) -> Any:
        return empty_pb2.Empty()


def main() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    provider_pb2_grpc.add_ResourceProviderServicer_to_server(RandomDouble(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    server.wait_for_termination()


if __name__ == "__main__":
    main()
