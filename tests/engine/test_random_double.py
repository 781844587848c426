"""The pulumi-random double (tests/support/engine_plugins/random_provider.py) over its gRPC protocol, started as the
engine starts a plugin: the two resources gb300 declares, their defaults, and replacement on any change."""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from tests.support.azure_native_double.provider import SECRET_SIG, SECRET_VALUE, to_struct

PLUGIN = Path(__file__).parents[1] / "support" / "engine_plugins" / "random_provider.py"
STRING_URN = "urn:pulumi:dev::gb300::gb300:secrets:ClusterSecrets$random:index/randomString:RandomString::dev-kv-suffix"
BYTES_URN = "urn:pulumi:dev::gb300::gb300:secrets:ClusterSecrets$random:index/randomBytes:RandomBytes::dev-munge-key"


@pytest.fixture(scope="module")
def stub() -> Iterator[provider_pb2_grpc.ResourceProviderStub]:
    with subprocess.Popen([sys.executable, str(PLUGIN), "127.0.0.1:1"], stdout=subprocess.PIPE, text=True) as plugin:
        assert plugin.stdout is not None
        port = int(plugin.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield provider_pb2_grpc.ResourceProviderStub(channel)
        plugin.terminate()


def test_a_vault_suffix_is_six_lowercase_letters_and_digits(stub: provider_pb2_grpc.ResourceProviderStub) -> None:
    """A RandomString of 6 without upper or special characters (the vault suffix) is six lowercase letters and
    digits, and is its own id."""
    asked = {"length": 6, "special": False, "upper": False, "numeric": True}
    checked = stub.Check(provider_pb2.CheckRequest(urn=STRING_URN, news=to_struct(asked)))
    created = stub.Create(provider_pb2.CreateRequest(urn=STRING_URN, properties=checked.inputs))
    result = created.properties["result"]
    assert len(result) == 6
    assert set(result) <= set("abcdefghijklmnopqrstuvwxyz0123456789")
    assert created.id == result


def test_random_bytes_are_secrets_of_the_length_asked(stub: provider_pb2_grpc.ResourceProviderStub) -> None:
    """RandomBytes answers its base64 and hex as secrets, of the length asked."""
    created = stub.Create(provider_pb2.CreateRequest(urn=BYTES_URN, properties=to_struct({"length": 1024})))
    value = created.properties["base64"]
    assert value[SECRET_SIG] == SECRET_VALUE
    assert len(base64.b64decode(value["value"])) == 1024


def test_any_change_replaces(stub: provider_pb2_grpc.ResourceProviderStub) -> None:
    """A new length replaces the random value; the same inputs are no change."""
    old = to_struct({"length": 6})
    same = stub.Diff(provider_pb2.DiffRequest(urn=STRING_URN, old_inputs=old, olds=old, news=old))
    longer = stub.Diff(
        provider_pb2.DiffRequest(urn=STRING_URN, old_inputs=old, olds=old, news=to_struct({"length": 8}))
    )
    assert same.changes == provider_pb2.DiffResponse.DIFF_NONE
    assert list(longer.replaces) == ["length"]
