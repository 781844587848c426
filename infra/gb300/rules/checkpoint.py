"""``lustre-checkpoint-throughput``: the Lustre filesystem writes one checkpoint within the stack's time budget.

The program carries ``gb300:storage.checkpoint`` onto the filesystem as tags (:func:`gb300.tags.checkpoint`),
so this rule reads only the resources, like every rule, and gives the same verdict in ``gb300 plan`` and in the
policy pack.

A filesystem tied to Blob (``hsm.settings`` set) also serves the auto-export's reads: by the assumption in
``data/lustre.yaml`` (``autoExport``) the export of the previous checkpoint reads it off over the checkpoint interval
(the write budget when no interval is set), so the filesystem needs the write's throughput plus that.

Manual check: ``gb300 size-storage --params <parameters> --checkpoint-minutes <minutes>`` and compare the row of
the filesystem's SKU with its ``storageCapacityTiB``; tied to Blob, add checkpoint bytes / interval.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from gb300 import tags as gb300_tags
from gb300.azure.inventory import dig
from gb300.facts import sizing
from gb300.findings import Level, Report
from gb300.resources import Resource
from gb300.rules.base import RuleContext, resource_rule

AMLFS = "azure-native:storagecache:AmlFilesystem"


def _number(text: object) -> float | None:
    try:
        value = float(str(text))
    except ValueError:
        return None
    return value if value > 0 else None


@resource_rule("lustre-checkpoint-throughput")
def lustre_checkpoint_throughput(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """Warn when a Lustre filesystem is too slow to write the configured checkpoint in time."""
    del ctx  # reads only the resources
    for res in resources:
        if res.type != AMLFS:
            continue
        tags = res.inputs.get("tags")
        if not isinstance(tags, dict) or gb300_tags.CHECKPOINT_PARAMETERS not in tags:
            continue
        params = _number(tags.get(gb300_tags.CHECKPOINT_PARAMETERS))
        minutes = _number(tags.get(gb300_tags.CHECKPOINT_MINUTES))
        per_param_tag = tags.get(gb300_tags.CHECKPOINT_BYTES_PER_PARAMETER)
        per_param = _number(per_param_tag) if per_param_tag is not None else None
        interval = _number(tags.get(gb300_tags.CHECKPOINT_INTERVAL_MINUTES, ""))
        tied = dig(res.inputs, "hsm", "settings", "container") is not None
        sku = sizing.lustre_skus().get(str(dig(res.inputs, "sku", "name")))
        capacity = res.inputs.get("storageCapacityTiB")
        if params is None or minutes is None or sku is None or not isinstance(capacity, int | float):
            continue  # a malformed tag or an unknown SKU: lustre-capacity-valid and the config schema report those
        drain = (interval or minutes) if tied else None
        need = sizing.size(sku, params, minutes, per_param, export_minutes=drain)
        if sku.throughput_mbps(int(capacity)) >= need.needed_mbps:
            continue
        export = (
            f" plus {sizing.export_mbps(params, drain, per_param) / 1000:,.1f} GB/s the auto-export reads to copy the "
            f"previous checkpoint to Blob over {drain:g} minutes (assumption: data/lustre.yaml autoExport)"
            if drain is not None
            else ""
        )
        took = sizing.write_minutes(sku, int(capacity), params, per_param)
        gbps = sku.throughput_mbps(int(capacity)) / 1000
        size_gb = sizing.checkpoint_bytes(params, per_param) / 1e9
        yield Report(
            Level.WARNING,
            res.urn,
            f"gb300:storage.lustre: {int(capacity)} TiB of {sku.name} writes {gbps:,.1f} GB/s, "
            f"so one checkpoint of {sizing.fmt_count(params)} parameters ({size_gb:,.0f} GB) takes {took:.1f} minutes; "
            f"gb300:storage.checkpoint allows {minutes:g} (needs {need.needed_mbps / 1000:,.1f} GB/s{export}). "
            f"Set capacityTiB to at least {need.capacity_tib} "
            f"(gb300 size-storage --params {sizing.fmt_count(params)} --checkpoint-minutes {minutes:g}"
            + (f" --export-minutes {drain:g}" if drain is not None else "")
            + ").",
        )
