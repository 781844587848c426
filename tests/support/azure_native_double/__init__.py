"""A double of the pulumi-azure-native provider plugin (3.29.0) at its gRPC boundary, for the real Pulumi engine.

The azure-native plugin binary cannot be built here (its main package embeds generated schema and metadata that
are not in its Go module) and would need Azure to answer. This double is a provider plugin written in Python on
the Pulumi SDK's own protocol (``pulumi.runtime.proto.provider_pb2_grpc.ResourceProviderServicer``). The engine
starts it as it starts any plugin: ``pulumi-resource-azure-native`` on ``PATH`` (``bin/`` here: the engine takes an
ambient plugin before its plugin cache, pulumi ``sdk/go/common/workspace/plugins.go`` ``getPluginInfoAndPath``),
which prints the port it serves on. It reports version 3.29.0 and serves the racks' parameterized package
(``Parameterize`` with the value gb300's ``compute_package`` registers: ``azure-native_compute_v20260301``).

What it does, following ``provider/pkg/provider/provider.go`` (:mod:`.provider`): Configure refuses an engine that
does not send old inputs (as 3.x does) and answers ``supportsPreview``; Check returns the inputs and a failure naming
the key path for every key of a data-declared ARM body (the racks' scale sets, generic resources) that Azure's SDK
models refuse, through gb300's own contract code (:mod:`gb300.azure.contract`); Diff reports a detailed diff and
replaces on path parameters and ``forceNew`` properties (:mod:`.diff`, the table in ``replacements.yaml``); Create
assigns the id Azure would (the plan's id shapes, :func:`gb300.plan.mocks.arm_id`, under the configured
subscription) and refuses a resource that already exists; its outputs are what ARM's GET returns, which
azure-native reads after every write: the inputs without the write-only properties ARM accepts on PUT and never
returns (``writeOnly`` in ``replacements.yaml``: a VM's or scale set's ``osProfile.customData`` and
``adminPassword``, a Key Vault secret's value), so the state holds those in its inputs only, as with the real
provider; Read returns what its record holds (an empty id when the resource is gone; on import, every property a
GET returns as an input, so an imported rack has no custom data until the program's is applied); Update and
Delete change the record; Invoke answers
``authorization:getClientConfig`` and ``storagecache:getRequiredAmlFSSubnetsSize``. Its record, faults and call log
are JSON in the directory ``GB300_AZURE_DOUBLE_DIR`` names (:mod:`.ledger`), so tests stage drift, deletion,
pre-existing resources and ARM's failures (409, 429 with Retry-After, a long-running operation ending Failed).

What it cannot show:

* ARM's own validation beyond the SDK models: required properties, value ranges and patterns in the provider's
  metadata, cross-property rules, names already taken, SKUs a region lacks, API versions a region does not serve.
  Typed resources other than the data-declared bodies are checked by the SDK's typed classes only.
* Azure's behaviour: real long-running-operation timing and polling, eventual consistency (a role assignment not
  yet visible), defaults Azure fills in on create beyond the few outputs the plan's mocks compute (a real GET also
  returns defaults gb300 never sets, such as a scale set's ``uniqueId``, ``timeCreated`` and disk defaults, so
  real outputs, and the state, are somewhat larger than the double's), soft delete and
  purge protection, dependent deletes (a resource group taking its contents), locks refusing a delete.
* Identity and limits: sign-in (any subscription id is accepted), RBAC, Azure Policy, quotas, capacity.
* azure-native's own parts: its ``forceNew`` metadata (a table written from sources instead), auto-naming and
  auto-location from the resource group (gb300 names and places everything), azcore's real retry policy beyond
  honouring ``Retry-After`` up to azcore's default three retries, custom resources (``storage:Blob``, Key Vault
  data-plane deletes), and a full schema (``GetSchema`` names the resources only: no code generation from it).
"""

from tests.support.azure_native_double.ledger import DIR_ENV, Fault, Ledger

__all__ = ["BIN", "DIR_ENV", "Fault", "Ledger"]

from pathlib import Path

BIN = Path(__file__).with_name("bin")
"""The directory to put first on ``PATH`` so the engine starts the double as ``pulumi-resource-azure-native``."""
