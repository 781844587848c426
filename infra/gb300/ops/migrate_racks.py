"""Move gb300 0.1's racks (Python dynamic resources) onto azure-native's compute package, never deleting a VM.

gb300 0.1 declared each rack scale set as a ``pulumi-python:dynamic:Resource`` (:data:`~gb300.azure.inventory.
LEGACY_DYNAMIC`), a child of its ``gb300:compute:GpuPool``. The program now declares a ``gb300:compute:Rack``
component per rack whose child is the package's scale set (:mod:`gb300.components.compute_package`). Both name
the same Azure scale set, so the migration moves state only:

0. ``pulumi stack export`` keeps the state as it was (``rollback.json``), to put back with ``pulumi stack import``;
1. ``pulumi import --file import.json`` adopts each deployed scale set under its new URN (a Read, no write), with
   the rack component created in the state as its parent;
2. ``pulumi state delete`` drops each legacy entry from the state (no provider call: the dynamic provider's
   delete, which would delete the scale set, never runs);
3. ``pulumi preview --json``, read by ``check_preview.py`` (:mod:`gb300.ops.migrate_preview`, copied beside
   commands.sh): every rack shows an update, which is expected after an import; a rack that would be replaced or
   deleted stops the script with one line naming it, what has moved and how to roll back.

:func:`plan_migration` reads the deployed state and the plan and builds both files; it refuses (a
:class:`~gb300.errors.UsageError`) what it cannot move safely. The import file follows pulumi/pulumi
``pkg/cmd/pulumi/operations/import.go`` (``importFile``, ``importSpec``, ``importParameterization``).
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gb300.azure.inventory import LEGACY_SCALE_SETS, arm_address, legacy_kind
from gb300.components import compute_package
from gb300.components.gpu_pool import RACK_TYPE
from gb300.errors import UsageError
from gb300.io import quoting, writer
from gb300.ops import migrate_preview
from gb300.plan.mocks import SUBSCRIPTION_ID
from gb300.plan.runner import SECRET
from gb300.plan.state import state_stacks
from gb300.resources import DeployedResource, ResourceRecord

POOL_TYPE = "gb300:compute:GpuPool"
RACK_ENTRY_SUFFIX = "-rack"  # the rack component's name in the import file (its logical name is the rack's)
DOCS = "docs/fabric.md, Migrating racks from gb300 0.1"
CHECK_SCRIPT = "check_preview.py"  # gb300.ops.migrate_preview, copied beside commands.sh
ROLLBACK = "rollback.json"  # the state before commands.sh moved anything
PREVIEW = "preview.json"
# The edges a state entry keeps to other entries (pulumi/pulumi apitype.ResourceV3).
_EDGES = ("dependencies", "propertyDependencies", "deletedWith")


@dataclass(frozen=True)
class RackMove:
    """One legacy rack and the planned scale set that adopts its Azure scale set."""

    legacy: DeployedResource
    planned: ResourceRecord
    pool_urn: str

    @property
    def name(self) -> str:
        return self.planned.name


@dataclass(frozen=True)
class Migration:
    """What ``gb300 migrate-racks`` writes: the moves, and the state entries that depend on a legacy rack."""

    moves: tuple[RackMove, ...]
    dependents: tuple[str, ...]  # URNs whose dependencies name a legacy rack (pulumi state delete refuses those)
    provider: ResourceRecord | None = None  # the package's explicit provider the racks name (program.py)
    provider_deployed: bool = False  # already in the state (else the import creates it)

    @property
    def name_table(self) -> dict[str, str]:
        """The import file's nameTable: each pool's name -> its URN, and a deployed provider's (in the state)."""
        table = {m.pool_urn.rsplit("::", 1)[-1]: m.pool_urn for m in self.moves}
        if self.provider is not None and self.provider_deployed:
            table[self.provider.name] = self.provider.urn
        return table


def legacy_resources(deployed: Sequence[DeployedResource]) -> list[DeployedResource]:
    """Every gb300 0.1 dynamic resource (rack or pool scale set, interconnect block) of a state."""
    return [d for d in deployed if legacy_kind(d) is not None]


def check_state(deployed: Sequence[DeployedResource], stack: str, where: str) -> list[DeployedResource]:
    """The legacy scale sets to move; a state of another stack, with nothing to move or with an interconnect
    block is refused."""
    stacks = state_stacks(deployed)
    if stacks and stack not in stacks:
        raise UsageError(
            f"{where} is the state of stack {', '.join(stacks)}, not {stack}: nothing would match "
            f"(name the stack file Pulumi.{stacks[0]}.yaml or use --stack {stacks[0]})"
        )
    legacy = legacy_resources(deployed)
    if not legacy:
        raise UsageError(f"{where}: no gb300 0.1 dynamic rack in the state, nothing to migrate")
    blocks = [d.name for d in legacy if legacy_kind(d) == "interconnect-block"]
    if blocks:
        raise UsageError(
            f"{where}: holds gb300 0.1 interconnect block(s) {', '.join(sorted(blocks)[:3])}"
            f"{' ...' if len(blocks) > 3 else ''} ({len(blocks)}), which azure-native's compute 2026-03-01 package "
            "cannot import: keep them out of the state by hand first (docs/fabric.md, Migrating racks from gb300 0.1)"
        )
    return [d for d in legacy if legacy_kind(d) in LEGACY_SCALE_SETS]


def match(
    legacy: Sequence[DeployedResource], planned: Sequence[ResourceRecord], deployed: Sequence[DeployedResource]
) -> list[RackMove]:
    """Pair each legacy scale set with the planned package scale set of the same Azure name."""
    by_name = {r.inputs.get("vmScaleSetName"): r for r in planned if r.type == compute_package.SCALE_SET_TOKEN}
    parents = {r.urn: r for r in planned}
    deployed_urns = {d.urn for d in deployed}
    moves, missing = [], []
    for old in legacy:
        azure_name = arm_address(old.id, old.inputs, old.name)[2]
        new = by_name.get(azure_name)
        rack = parents.get(new.parent or "") if new is not None else None
        pool = parents.get(rack.parent or "") if rack is not None else None
        if new is None or rack is None or rack.type != RACK_TYPE or pool is None or pool.type != POOL_TYPE:
            missing.append(azure_name)
            continue
        if pool.urn not in deployed_urns:
            raise UsageError(
                f"rack {azure_name}: its pool {pool.urn} is not in the state: the stack file renames the pool; "
                "migrate with the stack file that deployed it"
            )
        moves.append(RackMove(old, new, pool.urn))
    if missing:
        raise UsageError(
            f"the stack file no longer declares rack(s) {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} "
            f"({len(missing)}): migrate with the same stack file that deployed them"
        )
    return moves


def dependents(state_doc: Mapping[str, Any], legacy_urns: set[str]) -> tuple[list[str], list[str]]:
    """URNs of the state's other entries that are children of a legacy rack, and those that depend on one (its
    logs association, say)."""
    deployment = state_doc.get("deployment")
    resources = deployment.get("resources") if isinstance(deployment, Mapping) else None
    children, depending = [], []
    for raw in resources or []:
        if not isinstance(raw, Mapping) or raw.get("urn") in legacy_urns:
            continue
        named: set[str] = set(raw.get("dependencies") or [])
        for deps in (raw.get("propertyDependencies") or {}).values():
            named.update(deps or [])
        if raw.get("deletedWith"):
            named.add(str(raw["deletedWith"]))
        if raw.get("parent") in legacy_urns:
            children.append(str(raw["urn"]))
        elif named & legacy_urns:
            depending.append(str(raw["urn"]))
    return children, depending


def plan_migration(
    deployed: Sequence[DeployedResource],
    state_doc: Mapping[str, Any],
    planned: Sequence[ResourceRecord],
    stack: str,
    where: str,
) -> Migration:
    """Check the state against the plan and pair every legacy rack with its new scale set."""
    legacy = check_state(deployed, stack, where)
    moves = match(legacy, planned, deployed)
    children, depending = dependents(state_doc, {m.legacy.urn for m in moves})
    if children:
        raise UsageError(
            f"{where}: {children[0]} is a child of a gb300 0.1 rack, which nothing in gb300 creates; remove it from "
            "the state first ('pulumi state delete')"
        )
    provider = _provider(moves, planned)
    deployed_urns = {d.urn for d in deployed}
    return Migration(tuple(moves), tuple(depending), provider, provider is not None and provider.urn in deployed_urns)


def _provider(moves: Sequence[RackMove], planned: Sequence[ResourceRecord]) -> ResourceRecord | None:
    """The explicit provider every planned rack names (a reference ``<urn>::<id>``), or None for the default."""
    refs = {m.planned.provider for m in moves}
    if refs == {None}:
        return None
    ref = next(iter(refs))
    provider = next((r for r in planned if ref and ref.startswith(f"{r.urn}::")), None)
    if len(refs) != 1 or provider is None:
        raise UsageError(f"the planned racks name {len(refs)} providers; gb300 declares one (program.py)")
    return provider


def _real_ids(value: Any, subscription: str, what: str) -> Any:
    """``value`` with the plan's mock subscription id replaced by the deployed one (the rest of an id is real)."""
    if isinstance(value, str):
        if value == SECRET:
            raise UsageError(
                f"{what}: an input is a secret, which the plan does not show and an import file cannot carry; for the "
                "migration, give it through the environment instead of the stack (azure-native reads ARM_* variables)"
            )
        return value.replace(SUBSCRIPTION_ID, subscription)
    if isinstance(value, Mapping):
        return {k: _real_ids(v, subscription, what) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_real_ids(v, subscription, what) for v in value]
    return value


def _subscription(move: RackMove) -> str:
    """The rack's subscription from the state, which must be a GUID: commands.sh names it unquoted."""
    subscription = arm_address(move.legacy.id, move.legacy.inputs, move.name)[0]
    if not subscription:
        raise UsageError(f"rack {move.name}: the state gives neither its Azure id nor its subscriptionId")
    try:
        guid = str(uuid.UUID(str(subscription)))
    except ValueError:
        guid = ""
    if len(str(subscription)) != len(guid):
        raise UsageError(
            f"rack {move.name}: the state's subscription is no GUID (got {quoting.shown(str(subscription))})"
        )
    return guid


def _inputs(move: RackMove) -> dict[str, Any]:
    subscription = _subscription(move)
    inputs = {k: v for k, v in move.planned.inputs.items() if v is not None}
    result: dict[str, Any] = _real_ids(inputs, subscription, f"rack {move.name}")
    return result


def _parameterization() -> dict[str, str]:
    return {
        "pluginName": compute_package.BASE_PROVIDER,
        "pluginVersion": compute_package.BASE_PROVIDER_VERSION,
        # importParameterization.Value is []byte: JSON carries it base64-encoded, and the bytes are the schema's
        # parameter (itself base64 text), as RegisterPackage sends them.
        "value": compute_package.BASE64_PARAMETER,
    }


def import_file(migration: Migration) -> dict[str, Any]:
    """The ``pulumi import --file`` document: the package's provider (unless deployed), then per rack its
    component and its scale set under it."""
    resources: list[dict[str, Any]] = []
    provider = migration.provider
    if provider is not None and not migration.provider_deployed:
        # A provider in the resources block is created by the import, from these inputs (its configuration).
        resources.append(
            {
                "type": provider.type,
                "name": provider.name,
                "logicalName": provider.name,
                "version": compute_package.PACKAGE_VERSION,
                "parameterization": _parameterization(),
                "inputs": _real_ids(
                    {k: v for k, v in provider.inputs.items() if v is not None},
                    arm_address(migration.moves[0].legacy.id, migration.moves[0].legacy.inputs, "")[0],
                    f"provider {provider.name}",
                ),
            }
        )
    for move in migration.moves:
        if not move.legacy.id:
            raise UsageError(f"rack {move.name}: the state has no Azure id for it; refresh the stack first")
        entry = f"{move.name}{RACK_ENTRY_SUFFIX}"
        resources.append(
            {
                "type": RACK_TYPE,
                "name": entry,
                "logicalName": move.name,
                "component": True,
                "parent": move.pool_urn.rsplit("::", 1)[-1],
            }
        )
        resources.append(
            {
                "type": compute_package.SCALE_SET_TOKEN,
                "name": move.name,
                "logicalName": move.name,
                "id": move.legacy.id,
                "parent": entry,
                "version": compute_package.PACKAGE_VERSION,
                "parameterization": _parameterization(),
                **({"provider": provider.name} if provider is not None else {}),
                "inputs": _inputs(move),
            }
        )
    return {"nameTable": migration.name_table, "resources": resources}


# Run by commands.sh only when other state entries depend on a legacy rack: `pulumi state delete` refuses such a
# resource, so the edges go first (the next `pulumi up` records the entries' new dependencies).
_UNLINK = """\
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
res = doc["deployment"]["resources"]
legacy = {r["urn"] for r in res if r["type"] == "pulumi-python:dynamic:Resource"
          and (r.get("inputs") or {}).get("gb300Kind") in ("rack-scale-set", "pool-scale-set")}
for r in res:
    if r["urn"] in legacy:
        continue
    r["dependencies"] = [u for u in r.get("dependencies") or [] if u not in legacy]
    for key, urns in (r.get("propertyDependencies") or {}).items():
        r["propertyDependencies"][key] = [u for u in urns or [] if u not in legacy]
    if r.get("deletedWith") in legacy:
        del r["deletedWith"]
json.dump(doc, open(sys.argv[2], "w", encoding="utf-8"), indent=2)
"""


def _subscription_guard(sub: str) -> list[str]:
    """commands.sh lines that pin ARM_SUBSCRIPTION_ID to the racks' subscription ``sub`` (a checked GUID)."""
    return [
        "# The provider 'pulumi import' creates from import.json reads no stack config: it takes the racks'",
        "# subscription from the environment (as the deploy job's ARM_SUBSCRIPTION_ID gives it). Another stops here.",
        f'if [ "${{ARM_SUBSCRIPTION_ID:-{sub}}}" != {sub} ]; then',
        f'  echo "migrate-racks: ARM_SUBSCRIPTION_ID names another subscription; the racks are in {sub}" >&2',
        "  exit 1",
        "fi",
        f"export ARM_SUBSCRIPTION_ID={sub}",
        "",
    ]


def _unlink_dependents(dependents: Sequence[str], out: Path, q: Callable[[str], str]) -> list[str]:
    """commands.sh lines that drop the state's edges to legacy racks, so 'pulumi state delete' accepts them."""
    # the state's names reach a comment line: one holding a newline would end it and run as a command
    names = [quoting.comment(u.rsplit("::", 1)[-1], f"state entry {quoting.shown(u)}") for u in dependents]
    shown = ", ".join(names[:3])
    return [
        f"# 2a. {len(dependents)} state entries ({shown}, ...) depend on legacy racks, and",
        "# 'pulumi state delete' refuses a resource others depend on: drop those edges (state only).",
        f"pulumi stack export --file {q(str(out / 'imported.json'))}",
        f"python3 - {q(str(out / 'imported.json'))} {q(str(out / 'unlinked.json'))} <<'PY'",
        *_UNLINK.splitlines(),
        "PY",
        f"pulumi stack import --file {q(str(out / 'unlinked.json'))}",
        "",
    ]


def commands(migration: Migration, out: Path) -> str:
    """commands.sh: keep the state, import, (unlink dependents,) delete each legacy entry from the state, then
    preview and stop on a rack that would be replaced or deleted."""

    def q(value: str) -> str:  # every word from the state or the command line: quoted, or refused (gb300.io.quoting)
        return quoting.shell_word(value, f"commands.sh: {quoting.shown(value)}")

    rollback = q(str(out / ROLLBACK))
    restore = f"pulumi stack import --file {rollback}"
    lines = [
        "#!/usr/bin/env bash",
        "# A URN's '$' separates the parent's type from the resource's: single quotes keep it literal, on purpose.",
        "# shellcheck disable=SC2016",
        f"# gb300 migrate-racks: {len(migration.moves)} rack(s) from gb300 0.1's dynamic resources to azure-native's",
        f"# compute {compute_package.API_VERSION} package. Nothing here writes to Azure ({DOCS}).",
        "set -euo pipefail",
        "",
        *_subscription_guard(_subscription(migration.moves[0])),
        f"# 0. Keep the state as it is now: '{restore}' puts it back.",
        f"pulumi stack export --file {rollback}",
        "",
        "# 1. Adopt each deployed scale set under its new URN (a Read of Azure, no write), with its rack component.",
        f"pulumi import --file {q(str(out / 'import.json'))} --yes --protect=false --generate-code=false",
        "",
    ]
    if migration.dependents:
        lines += _unlink_dependents(migration.dependents, out, q)
    lines.append("# 2. Drop the legacy entries from the state only: the dynamic provider's delete never runs.")
    lines += [f"pulumi state delete {q(m.legacy.urn)} --yes" for m in migration.moves]
    preview = q(str(out / PREVIEW))
    moved = f"the state has already moved (Azure is unchanged): roll back with '{restore}'"
    lines += [
        "",
        "# 3. Every rack shows an update: azure-native's import Read returns Azure's defaults as inputs, and the",
        "# engine keeps the import file's inputs only at the top level. Expected; the first 'pulumi up' writes the",
        "# program's inputs and records the racks' resource options (replaceOnChanges, customTimeouts). A rack that",
        "# would be replaced or deleted stops here.",
        f"if ! pulumi preview --json > {preview}; then",
        f'  echo "migrate-racks: pulumi preview failed (its errors are in {preview}); {moved}" >&2',
        "  exit 1",
        "fi",
        f"{q(sys.executable)} {q(str(out / CHECK_SCRIPT))} {preview} {rollback} "
        f"{q(compute_package.SCALE_SET_TOKEN)} {q(RACK_TYPE)}",
        "",
    ]
    return "\n".join(lines)


def write(migration: Migration, out: Path) -> list[Path]:
    """Write import.json, commands.sh and the preview check it runs under ``out``; return their paths."""
    doc, script, check = out / "import.json", out / "commands.sh", out / CHECK_SCRIPT
    texts = (json.dumps(import_file(migration), indent=2) + "\n", commands(migration, out))  # refusals come first
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write ({exc.strerror})") from None
    writer.replace(doc, texts[0], mode=0o644, label="--out")
    writer.replace(script, texts[1], mode=0o755, label="--out")
    writer.replace(check, Path(migrate_preview.__file__).read_bytes(), mode=0o644, label="--out")
    return [doc, script, check]
