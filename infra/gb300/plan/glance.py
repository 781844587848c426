"""What the plan shows at a glance beside the summary: subnets with what they hold, access, storage, the
resources in a few lines, and (with ``--state``) what the change adds, changes and destroys.

Kept apart from :mod:`gb300.plan.summary` and :mod:`gb300.plan.render` so each concern stays one function:
``glance(cfg, resources)`` and ``state_changes(resources, deployed)`` feed the summary JSON, ``*_lines`` print it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gb300.config import StackConfig
from gb300.facts import sizing
from gb300.node import hooks as node_hooks
from gb300.resources import DeployedResource, ResourceRecord
from gb300.rules.data_loss import normalised

# What a non-scale-set resource in a subnet is called (scale sets' VMs are counted as VMs).
_HOLDERS = {
    "azure-native:network:NetworkInterface": "NIC",
    "azure-native:network:PrivateEndpoint": "private endpoint",
    "azure-native:network:BastionHost": "Bastion",
    "azure-native:storagecache:AmlFilesystem": "Lustre",
}
# Components and providers are bookkeeping, not Azure resources: counted once at the end of the resource lines.
_BOOKKEEPING = ("gb300:", "pulumi:providers:", "random:")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def subnet_holdings(resources: Sequence[ResourceRecord]) -> dict[str, dict[str, int]]:
    """Subnet id -> {what it holds: count}: the head's NIC, private endpoints, Bastion, Lustre."""
    subnet_ids = {str(r.id) for r in resources if r.type == "azure-native:network:Subnet" and r.id}
    out: dict[str, Counter[str]] = {}
    for record in resources:
        label = _HOLDERS.get(record.type)
        if label is None:
            continue
        for value in set(_strings(record.inputs)) & subnet_ids:
            out.setdefault(value, Counter())[label] += 1
    return {sid: dict(sorted(c.items())) for sid, c in out.items()}


def access(cfg: StackConfig) -> dict[str, Any]:
    """How users reach the cluster: the head's public IP and its SSH sources, Bastion, the admin user."""
    acc = cfg.access
    return {
        "loginPublicIp": acc.login_public_ip,
        "sshSourceRanges": list(acc.ssh_source_ranges),
        "bastion": cfg.network.bastion,
        "adminUsername": acc.admin_username,
    }


def storage(cfg: StackConfig) -> dict[str, Any]:
    """Lustre's SKU, capacity, throughput and mount; the Blob containers and their mounts."""
    out: dict[str, Any] = {}
    lustre = cfg.storage.lustre
    if lustre is not None:
        sku = sizing.lustre_skus().get(lustre.sku)
        mbps = sku.throughput_mbps(lustre.capacity_ti_b) if sku else None
        out["lustre"] = {
            "sku": lustre.sku,
            "capacityTiB": lustre.capacity_ti_b,
            "throughputGBps": round(mbps / 1000, 1) if mbps is not None else None,
            "mountPath": lustre.mount_path,
        }
    blob = cfg.storage.blob
    if blob is not None:
        out["blob"] = {"containers": [c.name for c in blob.containers]}
    return out


def state_changes(resources: Sequence[ResourceRecord], deployed: Sequence[DeployedResource]) -> dict[str, list[str]]:
    """By URN against the deployed state: what ``pulumi up`` adds, changes (inputs differ) and deletes.

    Names only, offline: ``pulumi preview --diff`` is exact; this is the short list a reviewer reads first.
    """

    def same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
        return bool(normalised(dict(a)) == normalised(dict(b)))

    def name(urn: str) -> str:
        return urn.rsplit("::", 1)[-1]

    old = {d.urn: d for d in deployed if not d.type.startswith(_BOOKKEEPING) and d.type != "pulumi:pulumi:Stack"}
    new = {r.urn: r for r in resources if not r.type.startswith(_BOOKKEEPING)}
    return {
        "adds": [name(u) for u in sorted(new.keys() - old.keys())],
        "changes": [name(u) for u in sorted(new.keys() & old.keys()) if not same(new[u].inputs, old[u].inputs)],
        "destroys": [name(u) for u in sorted(old.keys() - new.keys())],
    }


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def resource_lines(by_type: Mapping[str, int], width: int = 110) -> list[str]:
    """The resources by type in a few lines: counts above one largest first, then the singletons by name, then
    gb300's components and providers as one number."""
    azure = [(n, t.rsplit(":", 1)[-1]) for t, n in by_type.items() if not t.startswith(_BOOKKEEPING)]
    other = sum(n for t, n in by_type.items() if t.startswith(_BOOKKEEPING))
    items = [f"{n:,} {short}" for n, short in sorted(azure, key=lambda x: (-x[0], x[1])) if n > 1]
    singles = sorted(short for n, short in azure if n == 1)
    if singles:
        items.append("one each of " + singles[0])
        items += singles[1:]
    if other:
        items.append(f"and {other:,} gb300 components, providers and generated values")
    lines = [f"Resources ({sum(by_type.values()):,})"]
    current = " "
    for item in items:
        piece = f" {item},"
        if len(current) + len(piece) > width:
            lines.append(current)
            current = " "
        current += piece
    lines.append(current.rstrip(","))
    return lines


def subnet_lines(subnets: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per subnet: its prefix, what it holds, and addresses used of usable where known."""
    lines = ["Subnets (usable addresses after Azure's reserved ones)"]
    for sub in subnets:
        holds = dict(sub.get("holds") or {})
        parts = [_plural(sub["vms"], "VM")] if sub.get("vms") else []
        parts += [what if what in {"Lustre", "Bastion"} else _plural(n, what) for what, n in holds.items()]
        held = ", ".join(parts) if parts else "empty"
        lines.append(
            f"  {sub['name']:<20} {sub['prefix']:<18} {sub['used']:>7,} of {sub['usable']:>7,} used  holds {held}"
        )
    return lines


def access_lines(acc: Mapping[str, Any]) -> list[str]:
    """Who reaches the cluster and how, on one line."""
    if acc["loginPublicIp"]:
        sources = ", ".join(acc["sshSourceRanges"]) or "none (set gb300:access.sshSourceRanges)"
        head = f"head has a public IP, SSH from {sources}"
    else:
        head = "no public IP on any VM"
    via = "Bastion (`pulumi stack output loginCommand`)" if acc["bastion"] else "the VNet only (no Bastion)"
    return ["Access", f"  {head}; SSH as {acc['adminUsername']} through {via}"]


def storage_lines(store: Mapping[str, Any]) -> list[str]:
    """Lustre's SKU, size and throughput; the Blob containers."""
    lines = ["Storage"]
    lustre = store.get("lustre")
    if lustre:
        rate = f", {lustre['throughputGBps']:,} GB/s" if lustre.get("throughputGBps") is not None else ""
        lines.append(
            f"  Lustre {lustre['sku']}, {lustre['capacityTiB']:,} TiB{rate}, at {lustre['mountPath']} "
            f"(/home is {lustre['mountPath']}/home)"
        )
    else:
        lines.append("  no Lustre (gb300:storage.lustre): /home stays on each VM's OS disk")
    blob = store.get("blob")
    if blob:
        names = ", ".join(blob["containers"]) or "none"
        lines.append(f"  Blob: {_plural(len(blob['containers']), 'container')} ({names})")
    return lines


def change_lines(
    changes: Mapping[str, Sequence[str]],
    impact: str | None = None,
    replaced: Sequence[str] = (),
    limit: int = 6,
) -> list[str]:
    """With --state: the resources ``pulumi up`` adds, changes, replaces and destroys, a few names each; ``impact``
    (what the change destroys in one line, gb300.ops.ci_summary.impact_line) first. Destroyed machines are named
    before what goes with them (a rack's ``-logs`` association)."""
    lines = ["Against the deployed state (`pulumi preview --diff` shows every property)"]
    if impact:
        lines.append(f"  {impact}")
    rows = {**changes, "replaces": list(replaced)}
    for key in ("adds", "changes", "replaces", "destroys"):
        names = list(rows.get(key, ()))
        if key == "destroys":
            names.sort(key=lambda n: (n.endswith(_ASSOCIATED), n))
        shown = ", ".join(names[:limit]) + (f", ... ({len(names) - limit:,} more)" if len(names) > limit else "")
        lines.append(f"  {key:<9} {len(names):>6,}" + (f"  {shown}" if names else ""))
    return lines


# Names of resources that go with a machine (its data collection rule association): listed after the machines.
_ASSOCIATED = ("-logs",)


def hooks(cfg: StackConfig) -> list[dict[str, Any]]:
    """Each hook of ``gb300:hooks`` with its script's size and sha256, as the node payload ships it."""
    return [
        {
            "name": h.name,
            "point": h.point,
            "roles": list(h.roles),
            "pools": list(h.pools),
            "script": h.script,
            "bytes": h.size,
            "sha256": h.sha256,
            "timeoutSeconds": h.timeout_seconds,
            "onFailure": h.on_failure,
        }
        for h in node_hooks.listing(cfg)
    ]


def hook_lines(listed: Sequence[Mapping[str, Any]]) -> list[str]:
    """The plan's lines for the hooks: name, point, roles (pools), script, size, sha256, timeout, outcome."""
    lines = ["Hooks (in the signed node payload; docs/customize.md#bootstrap-hooks)"]
    for h in listed:
        where = ", ".join(h["roles"]) + (f" (pools {', '.join(h['pools'])})" if h["pools"] else "")
        lines.append(
            f"  {h['name']:<16} {h['point']:<16} {where}: {h['script']}, {h['bytes']:,} bytes, sha256 {h['sha256']}, "
            f"timeout {h['timeoutSeconds']}s, on failure {h['onFailure']}"
        )
    return lines
