"""Layer 1, the stack configuration: a stack file's ``gb300:`` namespace as typed, validated models.

The stack configuration contract (namespace ``gb300``). A stack file's ``config:`` block becomes a
:class:`StackConfig`; every problem is reported at once, one line per key path, via
:class:`gb300.errors.ConfigError`.

- :mod:`~gb300.config.models`: the pydantic models (the contract itself): :class:`StackConfig`, which joins the
  sections' models of :mod:`~gb300.config.cluster`, :mod:`~gb300.config.compute`, :mod:`~gb300.config.storage`,
  :mod:`~gb300.config.monitoring`, :mod:`~gb300.config.remediation` and :mod:`~gb300.config.policy`, over the
  field types of :mod:`~gb300.config.fields`; :mod:`~gb300.config.base` is their common base (a field's docstring
  is its description) and the one runner of the checks each section registers in its ``CHECKS``;
- :mod:`~gb300.config.checks`: field checks (names, CIDRs, SSH keys, sizes, paths);
- :mod:`~gb300.config.text`: free text: the length of each kind of value, the characters no value may hold;
- :mod:`~gb300.config.messages`: pydantic errors -> one line per key path, and :func:`parse`;
- :mod:`~gb300.config.loading`: reading a stack file or the Pulumi engine's config map;
- :mod:`~gb300.config.stacks`: which file is stack NAME (the Pulumi project, its stack folder and files);
- :mod:`~gb300.config.schema`: the JSON Schema (``gb300 schema``) and the documented key paths;
- :mod:`~gb300.config.stack_yaml`: strict YAML reading of stack files;
- :mod:`~gb300.config.netplan`: carving the subnets out of ``gb300:network.addressSpace``.

The names below are re-exported so that ``from gb300 import config; config.parse(...)`` reads as one module.
"""

from __future__ import annotations

from gb300.config.checks import NAMESPACE, RESERVED_POOL_NAMES, format_path
from gb300.config.loading import (
    from_pulumi_config,
    load_stack_file,
    load_stack_text,
    namespace_from_stack_config,
    to_pulumi_config,
)
from gb300.config.messages import parse
from gb300.config.models import (
    AccessSettings,
    AlertSettings,
    AllowDestroy,
    ClusterSettings,
    CostSettings,
    CpuPool,
    GpuPool,
    GrafanaSettings,
    HeadSettings,
    HealthSettings,
    LogsSettings,
    MonitoringSettings,
    NetworkSettings,
    PolicySettings,
    PrometheusSettings,
    StackConfig,
    Suppression,
)
from gb300.config.schema import json_schema, key_paths
from gb300.config.storage import (
    BlobContainer,
    BlobSettings,
    BlockCache,
    CheckpointSettings,
    LustreSettings,
    MaintenanceWindow,
    StorageSettings,
)

__all__ = [
    "NAMESPACE",
    "RESERVED_POOL_NAMES",
    "AccessSettings",
    "AlertSettings",
    "AllowDestroy",
    "BlobContainer",
    "BlobSettings",
    "BlockCache",
    "CheckpointSettings",
    "ClusterSettings",
    "CostSettings",
    "CpuPool",
    "GpuPool",
    "GrafanaSettings",
    "HeadSettings",
    "HealthSettings",
    "LogsSettings",
    "LustreSettings",
    "MaintenanceWindow",
    "MonitoringSettings",
    "NetworkSettings",
    "PolicySettings",
    "PrometheusSettings",
    "StackConfig",
    "StorageSettings",
    "Suppression",
    "format_path",
    "from_pulumi_config",
    "json_schema",
    "key_paths",
    "load_stack_file",
    "load_stack_text",
    "namespace_from_stack_config",
    "parse",
    "to_pulumi_config",
]
