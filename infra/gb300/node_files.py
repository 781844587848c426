"""The files the storage and monitoring bootstrap steps read, rendered from ``templates/`` (StrictUndefined).

The node bootstrap (``gb300.bootstrap``, ``cloud-init/steps.yaml``) places these with ``write_files`` and runs
the steps of :data:`STEPS`. Values that exist only after deployment (the Lustre MGS address, the remote-write
URL) come in as :class:`NodeOutputs`, resolved from the components' outputs.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

import jinja2
import pulumi

from gb300 import storage_facts
from gb300.components import monitoring as monitoring_component
from gb300.config import StackConfig
from gb300.paths import CLOUD_INIT_DIR, TEMPLATES_DIR


@dataclass(frozen=True)
class NodeOutputs:
    """Deployment outputs the node files need; empty when the piece is off."""

    lustre_mgs_address: str = ""
    storage_account: str = ""
    identity_client_id: str = ""
    remote_write_url: str = ""


def resolve_outputs(
    *,
    identity_client_id: pulumi.Input[str],
    lustre_mgs_address: pulumi.Input[str] | None = None,
    storage_account: pulumi.Input[str] | None = None,
    remote_write_url: pulumi.Input[str] | None = None,
) -> pulumi.Output[NodeOutputs]:
    """The components' outputs as one :class:`NodeOutputs`, for rendering custom data inside an ``apply``."""
    return pulumi.Output.all(
        identity_client_id, lustre_mgs_address or "", storage_account or "", remote_write_url or ""
    ).apply(
        lambda v: NodeOutputs(
            lustre_mgs_address=v[1], storage_account=v[2], identity_client_id=v[0], remote_write_url=v[3]
        )
    )


@dataclass(frozen=True)
class NodeFile:
    """One file a node gets: where, what, and its mode."""

    path: str
    content: str
    permissions: str = "0644"


@dataclass(frozen=True)
class Step:
    """A bootstrap step this feature adds: its script, roles, and the step it must run after."""

    name: str
    script: str
    roles: tuple[str, ...]
    after: str
    description: str


# Steps to add to cloud-init/steps.yaml (issue 3's list), in this order, before 99-ready.
STEPS: tuple[Step, ...] = (
    Step("72-lustre", "72-lustre.sh", ("gpu-node", "head"), "70-nvme-raid",
         "verify the Lustre client and mount Azure Managed Lustre over TCP LNet at gb300:storage.lustre.mountPath"),
    Step("74-blobfuse2", "74-blobfuse2.sh", ("gpu-node", "head"), "72-lustre",
         "mount the configured Blob containers with BlobFuse2 in block-cache mode (cache on the NVMe RAID)"),
    Step("85-dcgm-exporter", "85-dcgm-exporter.sh", ("gpu-node",), "80-fabric",
         "run the DCGM exporter on 127.0.0.1:9400, attached to nvidia-dcgm's host engine when it runs"),
    Step("86-node-exporter", "86-node-exporter.sh", ("gpu-node", "head"), "85-dcgm-exporter",
         "run the node exporter (InfiniBand, textfile collectors) and the gb300 node-metrics timer"),
    Step("87-prometheus-agent", "87-prometheus-agent.sh", ("gpu-node", "head"), "86-node-exporter",
         "run Prometheus in agent mode, remote-writing to the Azure Monitor workspace with the node identity"),
)  # fmt: skip


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # noqa: S701 - renders shell env files and YAML, never HTML
    )
    env.filters["shquote"] = lambda value: shlex.quote(str(value))
    return env


def _render(name: str, **context: Any) -> str:
    return _env().get_template(name).render(**context)


def _static(relative: str) -> str:
    return (TEMPLATES_DIR / relative).read_text(encoding="utf-8")


def steps_for(cfg: StackConfig) -> list[Step]:
    """The steps this stack needs (Lustre only with Lustre, exporters only with Prometheus)."""
    wanted = []
    for step in STEPS:
        if step.name == "72-lustre" and cfg.storage.lustre is None:
            continue
        if step.name == "74-blobfuse2" and not _mounts(cfg):
            continue
        if step.name in ("85-dcgm-exporter", "86-node-exporter", "87-prometheus-agent") and not (
            cfg.monitoring.prometheus.enabled
        ):
            continue
        wanted.append(step)
    return wanted


def _mounts(cfg: StackConfig) -> list[tuple[str, str, str]]:
    blob = cfg.storage.blob
    if blob is None:
        return []
    return [(c.name, c.mount_path, "ro" if c.access == "read" else "rw") for c in blob.containers if c.mount_path]


def storage_files(cfg: StackConfig, outputs: NodeOutputs) -> list[NodeFile]:
    """``/etc/gb300/storage.env`` and one BlobFuse2 config and env file per mounted container."""
    facts = storage_facts.load()
    client = facts["lustreClient"]
    lustre = cfg.storage.lustre
    blob = cfg.storage.blob
    cache = blob.block_cache if blob is not None else None
    files = [
        NodeFile(
            "/etc/gb300/storage.env",
            _render(
                "storage.env.j2",
                lustre={
                    "mgs_address": outputs.lustre_mgs_address if lustre else "",
                    "fsname": client["fsname"],
                    "mount_path": lustre.mount_path if lustre else "",
                    "options": client["options"],
                    "client_packages": list(client["packages"]["value"]),
                },
                blob={
                    "account": outputs.storage_account if blob else "",
                    "cache_path": cache.disk_path if cache else "",
                    "mounts": _mounts(cfg),
                },
            ),
        )
    ]
    if blob is None or cache is None:
        return files
    for container in blob.containers:
        if not container.mount_path:
            continue
        context = {
            "container": {
                "name": container.name,
                "mount_path": container.mount_path,
                "read_only": container.access == "read",
            },
            "cache": {
                "block_size_mib": cache.block_size_mi_b,
                "memory_mib": cache.memory_mi_b,
                "disk_path": cache.disk_path,
                "disk_size_mib": cache.disk_size_gi_b * 1024,
            },
            "account": outputs.storage_account,
            "identity_client_id": outputs.identity_client_id,
        }
        files.append(NodeFile(f"/etc/gb300/blobfuse2/{container.name}.yaml", _render("blobfuse2.yaml.j2", **context)))
        files.append(
            NodeFile(
                f"/etc/gb300/blobfuse2/{container.name}.env",
                f"GB300_BLOB_MOUNT_PATH={shlex.quote(container.mount_path)}\n",
            )
        )
    files.append(NodeFile("/etc/systemd/system/gb300-blobfuse2@.service", _static("systemd/gb300-blobfuse2@.service")))
    return files


def monitoring_files(cfg: StackConfig, pool: str, outputs: NodeOutputs) -> list[NodeFile]:
    """The exporters' and the Prometheus agent's configuration and units (none when Prometheus is off)."""
    prom = cfg.monitoring.prometheus
    if not prom.enabled:
        return []
    exporters = monitoring_component.facts()["exporters"]
    metrics = {"dcgm_listen": "127.0.0.1:9400", "node_listen": "127.0.0.1:9100"}
    return [
        NodeFile(
            "/etc/gb300/monitoring.env",
            _render(
                "monitoring.env.j2",
                exporters={
                    "dcgm_image": exporters["dcgmExporterImage"]["value"],
                    "node_package": exporters["nodeExporterPackage"]["value"],
                    **metrics,
                },
                prometheus={
                    "package": exporters["prometheusPackage"]["value"],
                    "remote_write_url": outputs.remote_write_url,
                },
            ),
        ),
        NodeFile(
            "/etc/gb300/prometheus-agent.yml",
            _render(
                "prometheus-agent.yml.j2",
                cluster=cfg.cluster.name,
                pool=pool,
                prometheus={
                    "scrape_interval_seconds": prom.scrape_interval_seconds,
                    "remote_write_url": outputs.remote_write_url,
                },
                identity_client_id=outputs.identity_client_id,
            ),
        ),
        NodeFile("/etc/gb300/dcgm-exporter/counters.csv", _static("dcgm-exporter/counters.csv")),
        NodeFile("/etc/systemd/system/gb300-dcgm-exporter.service", _static("systemd/gb300-dcgm-exporter.service")),
        NodeFile(
            "/etc/systemd/system/prometheus-node-exporter.service.d/gb300.conf",
            _static("systemd/gb300-node-exporter.conf"),
        ),
        NodeFile(
            "/etc/systemd/system/gb300-prometheus-agent.service", _static("systemd/gb300-prometheus-agent.service")
        ),
        NodeFile("/etc/systemd/system/gb300-node-metrics.service", _static("systemd/gb300-node-metrics.service")),
        NodeFile("/etc/systemd/system/gb300-node-metrics.timer", _static("systemd/gb300-node-metrics.timer")),
        NodeFile(
            "/usr/local/lib/gb300/gb300-node-metrics",
            (CLOUD_INIT_DIR / "scripts" / "gb300-node-metrics").read_text(encoding="utf-8"),
            "0755",
        ),
    ]


def node_files(cfg: StackConfig, pool: str, outputs: NodeOutputs) -> list[NodeFile]:
    """Every file the storage and monitoring steps of ``pool``'s nodes read."""
    return storage_files(cfg, outputs) + monitoring_files(cfg, pool, outputs)
