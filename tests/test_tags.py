"""The tag contract: every tag key is spelled in gb300.tags alone, and what nodes read is what the program writes."""

from __future__ import annotations

import re
from pathlib import Path

from gb300 import tags as gb300_tags
from gb300.azure import inventory
from gb300.paths import CLOUD_INIT_DIR, PACKAGE_DIR, POLICIES_DIR, TEMPLATES_DIR
from gb300.plan import PlanResult

TAG = r"(gb300-[a-z0-9-]+)"
# How a node script asks IMDS for one tag: the imds-tag helper (by path or as "$tag"), or a tagsList lookup (one
# name, or a map of the list read by name, as fetch-payload does).
READS = [
    re.compile(r"imds-tag\"?\s+" + TAG),
    re.compile(r"\"\$tag\"\s+" + TAG),
    re.compile(r"\[\"name\"\]\s*==\s*\"" + TAG + '"'),
    re.compile(r"tags\.get\(\"" + TAG + '"'),
]


def _node_files() -> list[Path]:
    return [p for root in (CLOUD_INIT_DIR, TEMPLATES_DIR) for p in sorted(root.rglob("*")) if p.is_file()]


def _tags_read_by_nodes() -> dict[str, list[str]]:
    """Tag -> the node scripts and templates that read it from IMDS."""
    found: dict[str, list[str]] = {}
    for path in _node_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for pattern in READS:
            for match in pattern.finditer(text):
                found.setdefault(match.group(1), []).append(str(path.relative_to(CLOUD_INIT_DIR.parent)))
    return found


def test_every_tag_a_node_reads_is_defined_in_the_contract() -> None:
    """Each tag a node script or template reads from IMDS is one of gb300.tags.NODE_READS, and each of those is read."""
    read = _tags_read_by_nodes()
    undefined = {tag: where for tag, where in read.items() if tag not in gb300_tags.NODE_READS}
    assert undefined == {}
    assert set(read) == set(gb300_tags.NODE_READS)


def test_nodes_carry_every_tag_they_read(reference_plan: PlanResult) -> None:
    """Every scale set and the head VM of the reference plan carry each tag the node scripts read."""
    nodes = [r for r in reference_plan.resources if inventory.is_scale_set(r)]
    nodes += [r for r in reference_plan.resources if r.type == "azure-native:compute:VirtualMachine"]
    assert nodes
    for node in nodes:
        assert set(gb300_tags.NODE_READS) <= set(node.inputs["tags"]), node.name


def test_every_tag_the_program_writes_is_in_the_contract(reference_plan: PlanResult, dev_plan: PlanResult) -> None:
    """No resource of either shipped stack carries a gb300 tag key that gb300.tags does not define."""
    written: set[str] = set()
    for plan in (reference_plan, dev_plan):
        for rec in plan.resources:
            tags = rec.inputs.get("tags")
            if isinstance(tags, dict):
                written |= {k for k in tags if k.startswith("gb300-") or k == gb300_tags.MANAGED_BY}
    assert written - gb300_tags.ALL == set()
    assert {gb300_tags.POOL, gb300_tags.RACK, gb300_tags.ROLE, gb300_tags.CUSTOM_DATA_HASH} <= written


def test_tag_keys_are_spelled_in_one_python_module() -> None:
    """Outside gb300/tags.py no Python module of the package or the policy pack spells a tag key."""
    contract = PACKAGE_DIR / "tags.py"
    spelled: dict[str, list[str]] = {}
    for root in (PACKAGE_DIR, POLICIES_DIR):
        for path in sorted(root.rglob("*.py")):
            if path == contract:
                continue
            text = path.read_text(encoding="utf-8")
            for key in gb300_tags.ALL:
                if re.search(rf"(?<![\w-]){re.escape(key)}(?![\w-])", text):
                    spelled.setdefault(key, []).append(path.name)
    assert spelled == {}


def test_node_tags_hold_the_deploy_time_values_only_when_deployed() -> None:
    """The node tag builder adds Lustre, Blob and Prometheus tags only for the stores and agent the stack has."""
    base = gb300_tags.cluster({"owner": "ml"}, "c1")
    bare = gb300_tags.node(base, keyvault="kv", node_client_id="id")
    assert bare == {"owner": "ml", gb300_tags.CLUSTER: "c1", "managed-by": "gb300", **_vault()}
    full = gb300_tags.node(base, keyvault="kv", node_client_id="id", lustre_mgs="10.0.0.4", prom_write="https://w")
    assert full[gb300_tags.LUSTRE_MGS] == "10.0.0.4"
    assert full[gb300_tags.PROM_WRITE] == "https://w"
    assert gb300_tags.BLOB_ACCOUNT not in full


def _vault() -> dict[str, str]:
    return {gb300_tags.KEYVAULT: "kv", gb300_tags.NODE_CLIENT_ID: "id"}
