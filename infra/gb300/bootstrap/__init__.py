"""Node bootstrap: per-role cloud-config rendered as Azure custom data.

The program builds a `BootstrapContext` per pool (`BootstrapContext.for_pool`, which applies the
stack's `gb300:software` overrides), calls `render_custom_data`, puts `custom_data` on the scale set
and `sha256` in a tag so the plan can tell which pools need a reimage. Errors derive from
`BootstrapError` (see `gb300.bootstrap.errors`).
"""

from __future__ import annotations

from gb300.bootstrap.context import BootstrapContext, ExtraFile, NodeFileLike
from gb300.bootstrap.errors import (
    BootstrapDataError,
    BootstrapError,
    SoftwareOverrideError,
    UnknownRoleError,
)
from gb300.bootstrap.render import (
    AZURE_CUSTOM_DATA_LIMIT,
    CUSTOM_DATA_HASH_TAG,
    RenderedCustomData,
    build_cloud_config,
    render_custom_data,
)
from gb300.bootstrap.secrets import find_secret_material
from gb300.bootstrap.settings import NcclSettings, NodeSettings, load_nccl, load_node
from gb300.bootstrap.software import (
    AptRepo,
    Component,
    DownloadFile,
    SoftwareSet,
    apply_software_overrides,
    check_software_overrides,
    load_software,
)
from gb300.bootstrap.steps import known_roles

__all__ = [
    "AZURE_CUSTOM_DATA_LIMIT",
    "CUSTOM_DATA_HASH_TAG",
    "AptRepo",
    "BootstrapContext",
    "BootstrapDataError",
    "BootstrapError",
    "Component",
    "DownloadFile",
    "ExtraFile",
    "NcclSettings",
    "NodeFileLike",
    "NodeSettings",
    "RenderedCustomData",
    "SoftwareOverrideError",
    "SoftwareSet",
    "UnknownRoleError",
    "apply_software_overrides",
    "build_cloud_config",
    "check_software_overrides",
    "find_secret_material",
    "known_roles",
    "load_nccl",
    "load_node",
    "load_software",
    "render_custom_data",
]
