"""Serve the azure-native double as a Pulumi plugin: print the port, then answer until the engine stops it.

The engine passes its own address (and logging flags) as arguments; the double needs neither.
"""

from __future__ import annotations

import signal
import sys
from concurrent import futures

import grpc
from pulumi.runtime.proto import provider_pb2_grpc

from tests.support.azure_native_double.provider import AzureNativeDouble


def main() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    provider_pb2_grpc.add_ResourceProviderServicer_to_server(AzureNativeDouble(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    signal.signal(signal.SIGTERM, lambda *_: server.stop(0))
    server.wait_for_termination()


if __name__ == "__main__":
    main()
