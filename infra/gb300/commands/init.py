"""`gb300 init NAME`: a new stack file made from a shipped one, with an identity of its own.

Examples::

    gb300 init mylab --ssh-public-key ~/.ssh/id_ed25519.pub
    gb300 init prod --from reference --location westus3 --deployer service-principal

Writes `Pulumi.NAME.yaml` in the stack folder of the Pulumi project around the current directory (`stacks/`),
copied from `--from` (`dev`: one rack; `reference`: 64 racks) with what must not be copied set anew:

* `gb300:cluster.name` derived from NAME (lowercase letters, digits, single hyphens, at most 12; `--cluster-name`
  to choose it), refused when another stack of the project already has it;

* a new payload signing key pair: the private key goes to `--signing-key` (default `~/.gb300/NAME-payload.pem`,
  mode 0600, missing folders created with mode 0700, refused inside the project), the public key into the stack;

* your SSH public key (`--ssh-public-key`; default `~/.ssh/id_ed25519.pub`, else `~/.ssh/id_rsa.pub`); the
  shipped stacks' example key is refused;

* `deployerPrincipalType` from `--deployer`: `user` (you, after `az login`; Azure refuses a role
  assignment whose principal type is wrong with `UnmatchedPrincipalType`) or `service-principal` (CI);

* `gb300:network.addressSpace`: the first block of the template's size, from the template's own address on, that
  overlaps no other stack of the project (`--address-space` to choose it; one that overlaps is exit 2), so two
  clusters of one project can be peered or share a hub;

* `--location`, `--zone`, `--vm-size` (the size's vCPU quota family is printed) and `--racks`.

The template's comments stay; the lines it changes are rewritten in place, and the new text is parsed as gb300
reads a stack and checked before anything is written. It never overwrites a file: an existing stack file or key
file is exit 2. Then it prints the day-1 commands in the order that works (docs/tutorial.md walks them): the
offline plan, the Azure sign-in, `pulumi login`, `pulumi stack init`, the subscription
(`azure-native:subscriptionId`), the preview with the policy pack, and `pulumi up` with the signing key. A stack
copied by hand is what the `stack-identity` rule catches.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gb300 import config
from gb300.commands.payload import write_private_key
from gb300.config import load_stack_file, stacks
from gb300.config.checks import check_name, check_ssh_public_key
from gb300.errors import ConfigError, DataError, Gb300Error, UsageError
from gb300.facts import catalog
from gb300.io import quoting, reader, writer
from gb300.node import manifest
from gb300.rules import identity
from gb300.rules.base import StackIdentity

NAME = "init"
TEMPLATES = ("dev", "reference")
DEPLOYERS = {"user": "User", "service-principal": "ServicePrincipal"}
SSH_KEY_DEFAULTS = ("~/.ssh/id_ed25519.pub", "~/.ssh/id_rsa.pub")
KEY_HOME = "~/.gb300"
CLUSTER_NAME_MAX = 12  # gb300.config.fields.Name
DEFAULT_ADDRESS_SPACE = "10.40.0.0/16"  # gb300.config.cluster.Network.address_space
# What `pulumi stack init` accepts in a stack's own name (without an organization or project prefix).
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def add_parser(subparsers: Any) -> None:
    """Register ``init`` on the CLI's subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="make a new stack file with its own cluster name, signing key and SSH key",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("name", metavar="NAME", help="the new stack's name: the file stacks/Pulumi.NAME.yaml")
    p.add_argument(
        "--from",
        dest="template",
        choices=TEMPLATES,
        default="dev",
        help="the shipped stack to start from (default dev)",
    )
    p.add_argument("--cluster-name", metavar="NAME", help="gb300:cluster.name (default: derived from the stack name)")
    p.add_argument(
        "--ssh-public-key",
        type=Path,
        metavar="FILE",
        help=f"your OpenSSH public key (default: the first of {', '.join(SSH_KEY_DEFAULTS)} that exists)",
    )
    p.add_argument(
        "--signing-key",
        type=Path,
        metavar="FILE",
        help=f"where the new payload signing key's private half goes, outside the project (default "
        f"{KEY_HOME}/NAME-payload.pem)",
    )
    p.add_argument(
        "--deployer",
        choices=tuple(DEPLOYERS),
        default="user",
        help="who runs pulumi up: user (az login; default) or service-principal (CI): "
        "gb300:storage.nodePayload.deployerPrincipalType",
    )
    p.add_argument(
        "--address-space",
        metavar="CIDR",
        help="gb300:network.addressSpace (default: the first block of the template's size no other stack uses)",
    )
    p.add_argument("--location", metavar="REGION", help="gb300:cluster.location (default: the template's)")
    p.add_argument("--zone", choices=("1", "2", "3"), help="gb300:cluster.zone (default: the template's)")
    p.add_argument(
        "--vm-size",
        choices=_gpu_sizes(),
        metavar="SIZE",
        help="the GPU pools' vmSize, which picks the vCPU quota family (default: the template's)",
    )
    p.add_argument("--racks", type=int, metavar="N", help="the first GPU pool's racks (default: the template's)")


def _gpu_sizes() -> list[str]:
    return sorted(n for n, s in catalog.load().skus.items() if s.is_gpu)


@dataclass(frozen=True)
class Choices:
    """What the new stack file says that the template does not."""

    stack: str
    cluster_name: str
    ssh_public_key: str
    signing_public_key: str
    deployer: str
    address_space: str
    location: str | None
    zone: str | None
    vm_size: str | None
    racks: int | None


def run(args: argparse.Namespace) -> int:
    project = stacks.find_project(Path.cwd().resolve())
    if project is None:
        raise UsageError(f"no Pulumi.yaml in {Path.cwd()} or a directory above it; run gb300 init in the project")
    stack = _stack_name(args.name)
    target = stacks.stack_file(stack, project)
    if target.exists():
        raise UsageError(f"{target} exists; gb300 init never overwrites a stack file (choose another NAME)")
    template = stacks.stack_file(args.template, project)
    if not template.is_file():
        raise UsageError(f"--from {args.template}: the template {template} does not exist")
    others = identity.siblings(target)
    cluster = _cluster_name(args.cluster_name, stack, others)
    key_path = _key_path(args.signing_key, stack, project.parent)
    ssh_key = _ssh_key(args.ssh_public_key)
    if args.racks is not None and args.racks < 1:
        raise UsageError(f"--racks must be at least 1 (got {args.racks})")
    template_text = reader.read_text(template, reader.STACK)
    space = _address_space(args.address_space, _template_space(template), _sibling_spaces(target))
    pem, public = manifest.generate_key()
    choices = Choices(
        stack,
        cluster,
        ssh_key,
        public,
        DEPLOYERS[args.deployer],
        space,
        args.location,
        args.zone,
        args.vm_size,
        args.racks,
    )
    text = render(template_text, args.template, choices)
    _check(text, target, choices)
    write_private_key(key_path, pem, flag="--signing-key")
    # O_EXCL | O_NOFOLLOW: a stack file or a planted symlink of that name (even a dangling one) is refused
    writer.create_new(target, text, mode=0o644, label=f"NAME {stack}: the stack file")
    _report(target, key_path, choices, args.template)
    return 0


def _stack_name(name: str) -> str:
    if not STACK_NAME.fullmatch(name):
        raise UsageError(
            f"NAME must be 1-100 letters, digits, hyphens, underscores or periods, as pulumi stack init takes it "
            f"(got {name!r})"
        )
    return name


def derive_cluster_name(stack: str) -> str:
    """``stack`` as a cluster name: lowercase, other characters as single hyphens, from the first letter, at most
    12 characters; empty when nothing is left."""
    text = re.sub(r"[^a-z0-9]+", "-", stack.lower())
    text = re.sub(r"^[^a-z]+", "", text)
    return text[:CLUSTER_NAME_MAX].strip("-")


def _cluster_name(given: str | None, stack: str, others: tuple[StackIdentity, ...]) -> str:
    name = given if given is not None else derive_cluster_name(stack)
    flag = "--cluster-name" if given is not None else f"NAME {stack!r}"
    if not name:
        raise UsageError(f"{flag}: no cluster name can be derived from it; give one with --cluster-name")
    if len(name) > CLUSTER_NAME_MAX:
        raise UsageError(f"--cluster-name must be at most {CLUSTER_NAME_MAX} characters (got {name!r})")
    try:
        check_name(name)
    except ValueError as exc:
        raise UsageError(f"--cluster-name {exc}") from None
    taken = [o.stack for o in others if o.cluster_name == name]
    if taken:
        raise UsageError(
            f"{flag}: {name!r} is already the cluster name of stack {taken[0]!r}: every Azure name would collide. "
            "Choose another with --cluster-name"
        )
    return name


def _space(raw: dict[str, Any]) -> str:
    network = raw.get("network")
    value = network.get("addressSpace") if isinstance(network, dict) else None
    return value if isinstance(value, str) else DEFAULT_ADDRESS_SPACE


def _template_space(template: Path) -> str:
    return _space(load_stack_file(template))


def _sibling_spaces(target: Path) -> dict[str, ipaddress.IPv4Network]:
    """The address space of every other stack file beside ``target`` (one that cannot be read is skipped: its own
    plan reports it)."""
    out = {}
    for path in stacks.stack_files(target.parent):
        if path.resolve() == target.resolve():
            continue
        try:
            out[stacks.name_of(path)] = ipaddress.IPv4Network(_space(load_stack_file(path)))
        except (Gb300Error, OSError, ValueError):
            continue
    return out


def _address_space(given: str | None, template: str, others: dict[str, ipaddress.IPv4Network]) -> str:
    """``given`` when it overlaps no other stack's; else the first block of ``template``'s size from ``template``
    on (wrapping inside its private range) that overlaps none."""
    if given is not None:
        try:
            net = ipaddress.IPv4Network(given)
        except ValueError as exc:
            raise UsageError(f"--address-space {given!r}: {exc}") from None
        taken = [name for name, other in others.items() if net.overlaps(other)]
        if taken:
            raise UsageError(
                f"--address-space {given}: overlaps the address space of stack {taken[0]!r} "
                f"({others[taken[0]]}); two clusters of one project must not overlap (they could never be peered)"
            )
        return str(net)
    start = ipaddress.IPv4Network(template)
    ranges = [ipaddress.IPv4Network(r) for r in catalog.load().limit("vnetAddressRanges")]
    outer = next((r for r in ranges if start.subnet_of(r)), start)
    blocks = list(outer.subnets(new_prefix=start.prefixlen)) if start.prefixlen >= outer.prefixlen else [start]
    first = blocks.index(start) if start in blocks else 0
    for net in blocks[first:] + blocks[:first]:
        if not any(net.overlaps(other) for other in others.values()):
            return str(net)
    raise UsageError(f"--address-space: every /{start.prefixlen} of {outer} is taken by another stack; give one")


def _key_path(given: Path | None, stack: str, project_dir: Path) -> Path:
    path = (given or Path(KEY_HOME) / f"{stack}-payload.pem").expanduser().resolve()
    if path.is_relative_to(project_dir.resolve()):
        raise UsageError(
            f"--signing-key {path}: inside the project {project_dir}; a private key must stay out of the repository "
            f"(default {KEY_HOME}/{stack}-payload.pem)"
        )
    if path.exists():
        raise UsageError(f"--signing-key {path}: exists; gb300 never overwrites a signing key (choose another path)")
    return path


def _ssh_key(given: Path | None) -> str:
    if given is None:
        found = [Path(p).expanduser() for p in SSH_KEY_DEFAULTS if Path(p).expanduser().is_file()]
        if not found:
            raise UsageError(
                f"--ssh-public-key: none of {', '.join(SSH_KEY_DEFAULTS)} exists; make one with "
                "ssh-keygen -t ed25519, or give the file"
            )
        given = found[0]
    try:
        text = reader.read_text(given.expanduser(), reader.SSH_PUBLIC_KEY).strip()
    except ConfigError as exc:
        raise UsageError(f"--ssh-public-key {exc}") from None
    try:
        key = check_ssh_public_key(text)
    except ValueError as exc:
        raise UsageError(f"--ssh-public-key {given}: {exc}") from None
    if identity.is_example_ssh_key(key):
        raise UsageError(
            f"--ssh-public-key {given}: is the shipped stacks' example key, whose private half nobody holds; give "
            "your own (ssh-keygen -t ed25519)"
        )
    return key.strip()


def _sub(text: str, pattern: str, replacement: str, *, count: int | None = 1) -> str:
    """``text`` with ``pattern`` (a line, multiline mode) replaced; the template must hold it ``count`` times (None:
    at least once), else the shipped template changed and this is a bug."""
    new, n = re.subn(pattern, lambda m: m.group(1) + replacement, text, flags=re.MULTILINE)
    if n == 0 or (count is not None and n != count):
        raise DataError(f"the stack template does not hold {pattern!r} {count or 'at least once'} time(s) (got {n})")
    return new


def yaml_scalar(value: str) -> str:
    """``value`` as one YAML scalar on one line, written by the YAML library (quoted where YAML needs it: a comment
    holding `` #`` or ``: ``), never pasted raw."""
    quoting.checked(value, "a value written into the stack file")
    text = yaml.safe_dump(value, width=2**31 - 1, allow_unicode=True)
    text = text.removesuffix("\n...\n").removesuffix("\n")
    if "\n" in text:
        raise UsageError(f"{value!r} cannot be written on one line of the stack file")
    return text


def render(text: str, template: str, c: Choices) -> str:
    """The template's text with ``c`` written into it, every comment kept; the header says where it came from."""
    body = text[text.index("config:") :]
    header = (
        f"# Stack {c.stack}: made by gb300 init from stacks/Pulumi.{template}.yaml, with its own cluster name, payload "
        "signing key\n# and SSH key. Every gb300 key is documented in docs/configuration.md.\n"
    )
    body = _sub(body, r"^(    name: ).*$", yaml_scalar(c.cluster_name))
    body = _sub(body, r"^(    sshPublicKey: ).*$", yaml_scalar(c.ssh_public_key))
    body = _sub(body, r"^(      signingPublicKey: ).*$", yaml_scalar(c.signing_public_key))
    body = _sub(body, r"^(      deployerPrincipalType: ).*$", c.deployer)
    body = _sub(body, r"^(    addressSpace: ).*$", c.address_space)
    who = (
        "a person signed in with az login (gb300 init --deployer user)"
        if c.deployer == "User"
        else "a service principal, as CI does (gb300 init --deployer service-principal)"
    )
    body = _sub(body, r"^(    # )The pipelines .* deploy this stack as a service principal\.$", f"Deployed by {who}.")
    body = re.sub(rf"^(      env: ){re.escape(template)}$", rf"\g<1>{c.stack}", body, flags=re.MULTILINE)
    if c.location is not None:
        body = _sub(body, r"^(    location: ).*$", yaml_scalar(c.location))
    if c.zone is not None:
        body = _sub(body, r"^(    zone: ).*$", f'"{c.zone}"')
    if c.vm_size is not None:
        body = _sub(body, r"^(      vmSize: ).*$", yaml_scalar(c.vm_size), count=None)
    if c.racks is not None:
        body = _sub(body, r"^(      racks: ).*$", str(c.racks), count=None)
    return header + body


def _check(text: str, target: Path, c: Choices) -> None:
    """Parse the new file's text as gb300 will (exit 2 for a choice the config refuses, such as an unknown region)
    and check it says what was chosen."""
    # In memory: nothing is written beside the user's files to read it. A ConfigError (an unknown region) is exit 2
    # with one line per problem, as gb300 plan says it.
    cfg = config.parse(config.load_stack_text(text, target))
    said = (cfg.cluster.name, cfg.access.ssh_public_key, cfg.storage.node_payload.signing_public_key)
    if said != (c.cluster_name, c.ssh_public_key, c.signing_public_key):
        raise DataError(f"gb300 init wrote {said!r} where it chose {c!r}: the template's layout is not what it reads")


def _report(target: Path, key: Path, c: Choices, template: str) -> None:
    cfg = config.parse(config.load_stack_file(target))
    pool = cfg.gpu_pools[0]
    sku = catalog.load().sku(pool.vm_size)
    vcpus = sum(p.racks for p in cfg.gpu_pools) * sku.vms_per_nvlink_domain * sku.vcpus
    rel = os.path.relpath(target)
    print(
        f"gb300 init: wrote {rel} (from {template}: cluster {c.cluster_name}, {cfg.cluster.location}, deployed as "
        f"{c.deployer}) and the payload signing key {key} (0600; keep it out of the repository)",
        file=sys.stderr,
    )
    print(
        f"gb300 init: {pool.vm_size} counts against the vCPU quota family {sku.quota_family.value}: {vcpus:,} vCPUs "
        f"in {cfg.cluster.location} (az vm list-usage --location {cfg.cluster.location} -o table)",
        file=sys.stderr,
    )
    print("Next:")
    for line in next_commands(c.stack, key, c.deployer):
        print(f"  {line}")


def next_commands(stack: str, key: Path, deployer: str) -> list[str]:
    """The day-1 commands after init, in the order that works, from the project's root: the offline plan; the
    Azure sign-in (a person's ``az login``; a service principal signs in by ``ARM_*`` variables as the pipelines
    do, docs/gitops.md); the state backend; the stack; its subscription; the preview with the policy pack (the
    rules again, against what Azure holds); and ``up`` with the payload signing key."""
    if deployer == "User":
        signin = ["az login"]
        subscription = '"$(az account show --query id -o tsv)"'
    else:
        signin = ["export ARM_CLIENT_ID=<app id> ARM_TENANT_ID=<tenant id> ARM_USE_OIDC=true  # docs/gitops.md"]
        subscription = "<subscription id>"
    return [
        f"gb300 plan --stack {stack}",
        *signin,
        "pulumi login",
        f"pulumi stack init {stack}",
        f"pulumi config set azure-native:subscriptionId {subscription} --stack {stack}",
        f"pulumi preview --stack {stack} --policy-pack policies",
        f'GB300_PAYLOAD_SIGNING_KEY="$(cat {key})" pulumi up --stack {stack}',
    ]
