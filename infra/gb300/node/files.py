"""The storage and monitoring files of a node's custom data, rendered from ``templates/`` (contents only).

Which role carries them, and the steps that use them, are declared in the node registry (:mod:`gb300.node.steps`).

Everything here comes from the stack config alone, so custom data (and its hash) is known at plan time
(:mod:`gb300.node.custom_data`). Values that exist only after deployment reach nodes as VM tags that the steps
read from IMDS with ``imds-tag`` (:data:`gb300.tags.NODE_READS`). Templates render with the one environment of
:mod:`gb300.node.templating` (StrictUndefined); files that need a deploy-time value are placed as ``*.in`` with
``@NAME@`` placeholders the step fills in.
"""

from __future__ import annotations

import shlex

from gb300.config import StackConfig
from gb300.facts import storage_facts
from gb300.facts.software import load_checksums, pin
from gb300.node import templating
from gb300.node.boot_context import ExtraFile as NodeFile  # one file type for write_files
from gb300.paths import CLOUD_INIT_DIR, TEMPLATES_DIR

IMDS_TAG = "/usr/local/lib/gb300/imds-tag"


def _render(name: str, **context: object) -> str:
    return templating.render(name, **context)


def _static(relative: str) -> str:
    return (TEMPLATES_DIR / relative).read_text(encoding="utf-8")


def _mounts(cfg: StackConfig) -> list[tuple[str, str, str]]:
    blob = cfg.storage.blob
    if blob is None:
        return []
    return [(c.name, c.mount_path, "ro" if c.access == "read" else "rw") for c in blob.containers if c.mount_path]


def storage_files(cfg: StackConfig) -> list[NodeFile]:
    """``/etc/gb300/storage.env`` and one BlobFuse2 config (``.yaml.in``) and env file per mounted container."""
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
                    "fsname": client["fsname"],
                    "mount_path": lustre.mount_path if lustre else "",
                    "options": client["options"],
                    "client_packages": list(pin("lustreClientPackages")),
                },
                blob={
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
            # BlobFuse2's ADLS component needs a hierarchical namespace; a flat account (versioning) is 'block'.
            "hierarchical_namespace": blob.hierarchical_namespace,
            "cache": {
                "block_size_mib": cache.block_size_mi_b,
                "memory_mib": cache.memory_mi_b,
                "disk_path": cache.disk_path,
                "disk_size_mib": cache.disk_size_gi_b * 1024,
            },
        }
        files.append(
            NodeFile(f"/etc/gb300/blobfuse2/{container.name}.yaml.in", _render("blobfuse2.yaml.j2", **context))
        )
        files.append(
            NodeFile(
                f"/etc/systemd/system/gb300-blobfuse2-{container.name}.service",
                _render("systemd/gb300-blobfuse2.service.j2", container=container.name),
            )
        )
        files.append(
            NodeFile(
                f"/etc/gb300/blobfuse2/{container.name}.env",
                f"GB300_BLOB_MOUNT_PATH={shlex.quote(container.mount_path)}\n",
            )
        )
    return files


def monitoring_files(cfg: StackConfig, pool: str) -> list[NodeFile]:
    """The exporters' and the Prometheus agent's configuration and units (none when Prometheus is off)."""
    prom = cfg.monitoring.prometheus
    if not prom.enabled:
        return []
    metrics = {"dcgm_listen": "127.0.0.1:9400", "node_listen": "127.0.0.1:9100"}
    return [
        NodeFile(
            "/etc/gb300/monitoring.env",
            _render(
                "monitoring.env.j2",
                exporters={
                    # By digest once `gb300 software lock` has pinned it (checksums.yaml images).
                    "dcgm_image": load_checksums().image_ref(pin("dcgmExporterImage")),
                    "node_package": pin("nodeExporterPackage"),
                    **metrics,
                },
                prometheus={"package": pin("prometheusPackage")},
            ),
        ),
        NodeFile(
            "/etc/gb300/prometheus-agent.yml.in",
            _render(
                "prometheus-agent.yml.j2",
                cluster=cfg.cluster.name,
                pool=pool,
                prometheus={"scrape_interval_seconds": prom.scrape_interval_seconds},
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
