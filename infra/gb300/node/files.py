"""The storage and monitoring files' contents, rendered from ``templates/`` (contents only, no node paths).

Which role carries them, where they land and the steps that use them are declared in the node registry
(:mod:`gb300.node.registry`): each row names its node path and one content function of this module.

Everything here comes from the stack config alone, so custom data (and its hash) is known at plan time
(:mod:`gb300.node.bundle`). Values that exist only after deployment reach nodes as VM tags that the steps
read from IMDS with ``imds-tag`` (:data:`gb300.tags.NODE_READS`). Templates render with the one environment of
:mod:`gb300.node.templating` (StrictUndefined); files that need a deploy-time value are placed as ``*.in`` with
``@NAME@`` placeholders the step fills in.
"""

from __future__ import annotations

from gb300.config import BlobContainer, StackConfig
from gb300.facts import storage_facts
from gb300.facts.loader import data
from gb300.facts.software import load_checksums, pin
from gb300.io import quoting
from gb300.node import templating


def _render(name: str, **context: object) -> str:
    return templating.render(name, **context)


def _mounts(cfg: StackConfig) -> list[tuple[str, str, str]]:
    blob = cfg.storage.blob
    if blob is None:
        return []
    return [(c.name, c.mount_path, "ro" if c.access == "read" else "rw") for c in blob.containers if c.mount_path]


def storage_env(cfg: StackConfig) -> str:
    """``storage.env``: the Lustre client's settings and the Blob mounts the storage steps read."""
    client = storage_facts.load()["lustreClient"]
    lustre = cfg.storage.lustre
    blob = cfg.storage.blob
    cache = blob.block_cache if blob is not None else None
    return _render(
        "storage.env.j2",
        lustre={
            "fsname": client["fsname"],
            "mount_path": lustre.mount_path if lustre else "",
            "options": client["options"],
            "client_packages": list(pin("lustreClientPackages")),
        },
        blob={"cache_path": cache.disk_path if cache else "", "mounts": _mounts(cfg)},
    )


def mounted_containers(cfg: StackConfig) -> list[str]:
    """The Blob containers with a ``mountPath`` (each gets a BlobFuse2 config, unit and env file); none without
    a block cache."""
    blob = cfg.storage.blob
    if blob is None or blob.block_cache is None:
        return []
    return [c.name for c in blob.containers if c.mount_path]


def _container(cfg: StackConfig, name: str) -> BlobContainer:
    assert cfg.storage.blob is not None  # noqa: S101 - mounted_containers named it
    [container] = [c for c in cfg.storage.blob.containers if c.name == name]
    return container


def blobfuse_config(cfg: StackConfig, name: str) -> str:
    """Container ``name``'s BlobFuse2 config (``.yaml.in``: the step fills in the account)."""
    blob = cfg.storage.blob
    assert blob is not None  # noqa: S101 - mounted_containers named it
    cache = blob.block_cache
    assert cache is not None  # noqa: S101 - mounted_containers named it
    container = _container(cfg, name)
    context = {
        "container": {"name": name, "mount_path": container.mount_path, "read_only": container.access == "read"},
        # BlobFuse2's ADLS component needs a hierarchical namespace; a flat account (versioning) is 'block'.
        "hierarchical_namespace": blob.hierarchical_namespace,
        "cache": {
            "block_size_mib": cache.block_size_mi_b,
            "memory_mib": cache.memory_mi_b,
            "disk_path": cache.disk_path,
            "disk_size_mib": cache.disk_size_gi_b * 1024,
        },
    }
    return _render("blobfuse2.yaml.j2", **context)


def blobfuse_unit(_cfg: StackConfig, name: str) -> str:
    """Container ``name``'s mount unit."""
    return _render("systemd/gb300-blobfuse2.service.j2", container=name)


def blobfuse_env(cfg: StackConfig, name: str) -> str:
    """Container ``name``'s mount path, for its unit."""
    path = _container(cfg, name).mount_path or ""
    return f"GB300_BLOB_MOUNT_PATH={quoting.shell_word(path, f'the mount path of container {name}')}\n"


def monitoring_env(cfg: StackConfig) -> str:
    """``monitoring.env``: the exporters' images and packages and their listen addresses."""
    return _render(
        "monitoring.env.j2",
        exporters={
            # By digest once `gb300 software lock` has pinned it (checksums.yaml images).
            "dcgm_image": load_checksums().image_ref(pin("dcgmExporterImage")),
            "node_package": pin("nodeExporterPackage"),
            "dcgm_listen": "127.0.0.1:9400",
            "node_listen": "127.0.0.1:9100",
        },
        prometheus={"package": pin("prometheusPackage")},
    )


def prometheus_agent(cfg: StackConfig, pool: str, head: bool = False) -> str:
    """The Prometheus agent's configuration (``.yml.in``: the step fills in the workspace's endpoint); the head's
    also scrapes slurmctld's metrics endpoints (data/metrics.yaml ``exporters.slurmctld``)."""
    slurmctld = data("metrics.yaml")["exporters"]["slurmctld"] if head else None
    return _render(
        "prometheus-agent.yml.j2",
        cluster=cfg.cluster.name,
        pool=pool,
        prometheus={"scrape_interval_seconds": cfg.monitoring.prometheus.scrape_interval_seconds},
        slurmctld=slurmctld,
    )


def login_limits(cfg: StackConfig) -> str:
    """The ``user-.slice`` drop-in of a login node: what each user's processes may take together
    (``gb300:login.userLimits``)."""
    login = cfg.login
    if login is None:
        raise ValueError("login_limits needs gb300:login")
    return _render("systemd/gb300-user-limits.conf.j2", limits=login.user_limits)


def break_glass(cfg: StackConfig) -> str:
    """The sshd drop-in of a login node that refuses the admin's key (``gb300:login.adminKey`` false)."""
    return _render("sshd-break-glass.conf.j2", admin=cfg.access.admin_username)
