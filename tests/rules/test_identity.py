"""`stack-identity`: a stack carrying the shipped example SSH key, or another stack's cluster name or payload
signing key, is flagged (the key a warning, the other two errors); the shipped example stacks get an info for their
example key and nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gb300 import cli
from gb300.config import load_stack_file
from gb300.findings import Level
from gb300.rules import BY_ID, CONFIG_RULES, identity
from gb300.rules.base import StackIdentity
from tests.support.ci_files import stacks_in_repo

EXAMPLE = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDuptD3soyOcGeTftsws1pF9pLvy/fYHdTEGGBbeVuI6 ops@example"
OWN = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIADDzJxvaxYSYM901ZPfxr7kcSikvxUfUG9YOOBv67WK me@lab"
DEV = StackIdentity("dev", "dev", "MCowBQYDK2VwAyEARz3cKrC5iBHPh77fkCoRFBDj5htnapjgOx2TwphKP8I=")
REF = StackIdentity("reference", "ref", "MCowBQYDK2VwAyEAgeiBlSkf1k4dQ2zNgBPO9H/Toan2JxHMNpesGJG98bY=")
OWN_SIGNING = "MCowBQYDK2VwAyEAPGQZiyPnMOc8LsXFq6bhpiFapXW+Z2L0iHs7WTOZlpE="


@pytest.mark.parametrize(
    ("stack", "cluster", "ssh", "signing", "expected"),
    [
        # a copy of dev made by hand: all three
        ("mylab", "dev", EXAMPLE, DEV.signing_public_key, [
            (Level.WARNING, "gb300:access.sshPublicKey"),
            (Level.ERROR, "gb300:cluster.name"),
            (Level.ERROR, "gb300:storage.nodePayload.signingPublicKey"),
        ]),
        ("mylab", "mylab", EXAMPLE, OWN_SIGNING, [(Level.WARNING, "gb300:access.sshPublicKey")]),
        ("mylab", "ref", OWN, OWN_SIGNING, [(Level.ERROR, "gb300:cluster.name")]),
        ("mylab", "mylab", OWN, REF.signing_public_key, [(Level.ERROR, "gb300:storage.nodePayload.signingPublicKey")]),
        # the example key with another comment is the same key
        ("mylab", "mylab", EXAMPLE.replace("ops@example", "me@here"), OWN_SIGNING, [
            (Level.WARNING, "gb300:access.sshPublicKey"),
        ]),
        # the shipped examples: an info for the example key, nothing else
        ("dev", "dev", EXAMPLE, DEV.signing_public_key, [(Level.INFO, "gb300:access.sshPublicKey")]),
        ("mylab", "mylab", OWN, OWN_SIGNING, []),
        ("mylab", "mylab", OWN, None, []),
    ],
)  # fmt: skip
def test_stack_identity_table(
    stack: str, cluster: str, ssh: str, signing: str | None, expected: list[tuple[Level, str]]
) -> None:
    """Each case's findings, level and key path, against the shipped stacks as siblings (less itself)."""
    others = [s for s in (DEV, REF) if s.stack != stack]
    found = identity.stack_identity(stack, cluster, ssh, signing, others)
    assert [(f.level, f.resource) for f in found] == expected


def test_the_rule_is_registered_as_a_config_rule() -> None:
    """The registry holds it (the plan and the policy pack run it; it is suppressible by its id)."""
    assert identity.RULE_ID in CONFIG_RULES
    assert BY_ID[identity.RULE_ID].suppressible


def test_siblings_are_the_other_stack_files_and_unreadable_ones_are_skipped(tmp_path: Path) -> None:
    """The other Pulumi.*.yaml in the project's stack folder are read as written; a broken one is skipped; a stack
    file outside the project's stack folder has none."""
    (tmp_path / "Pulumi.yaml").write_text("name: x\nruntime: python\n")
    (tmp_path / "Pulumi.a.yaml").write_text("config:\n  gb300:cluster:\n    name: a\n")
    (tmp_path / "Pulumi.b.yaml").write_text(
        "config:\n  gb300:storage:\n    nodePayload:\n      signingPublicKey: KEY\n"
    )
    (tmp_path / "Pulumi.broken.yaml").write_text("config: [\n")
    assert identity.siblings(tmp_path / "Pulumi.a.yaml") == (StackIdentity("b", None, "KEY"),)
    (tmp_path / "Pulumi.yaml").write_text("name: x\nruntime: python\nstackConfigDir: stacks\n")
    assert identity.siblings(tmp_path / "Pulumi.a.yaml") == ()  # not the project's stack folder


def test_a_hand_copied_dev_stack_fails_the_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """cp stacks/Pulumi.dev.yaml stacks/Pulumi.copy.yaml, then gb300 plan --stack copy: exit 1 with the three
    errors (and dev's plan names the copy too: the collision is both stacks'); without the copy, dev passes with
    only an info about its example key."""
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "stacks").mkdir()
    (tmp_path / "Pulumi.yaml").write_text((root / "Pulumi.yaml").read_text())
    dev = (root / "stacks" / "Pulumi.dev.yaml").read_text()
    (tmp_path / "stacks" / "Pulumi.dev.yaml").write_text(dev)
    (tmp_path / "stacks" / "Pulumi.copy.yaml").write_text(dev)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["plan", "--stack", "copy", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert out.count(f"error   {identity.RULE_ID}:") == 2
    assert out.count(f"warning {identity.RULE_ID}:") == 1
    assert cli.main(["plan", "--stack", "dev", "--quiet"]) == 1
    assert "is also the cluster name of stack 'copy'" in capsys.readouterr().out
    (tmp_path / "stacks" / "Pulumi.copy.yaml").unlink()
    assert cli.main(["plan", "--stack", "dev", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if identity.RULE_ID in line] == [
        f"info    {identity.RULE_ID}: is the example key the shipped stacks carry: nobody holds its private half, so "
        "nobody could log in to this example stack. Put your own public key here before deploying it"
    ]


@pytest.mark.parametrize("stack", sorted(stacks_in_repo()))
def test_every_shipped_stack_gets_only_an_info_for_its_example_key(stack: str) -> None:
    """Each stack file gb300 ships (stacks/Pulumi.*.yaml), planned beside the others: stack-identity says at most an
    info about it (the example key), never the warning or error a hand-made copy gets."""
    root = Path(__file__).resolve().parents[2]
    stack_file = root / "stacks" / f"Pulumi.{stack}.yaml"
    raw = load_stack_file(stack_file)
    own = identity.identity(stack, raw)
    ssh = ((raw.get("access") or {}).get("sshPublicKey")) or ""
    others = identity.siblings(stack_file)
    found = list(identity.stack_identity(stack, own.cluster_name or "", ssh, own.signing_public_key, others))
    assert [(f.level, f.resource) for f in found if f.level is not Level.INFO] == []


def test_the_policy_pack_names_the_stack_from_the_urns(dev_plan: Any) -> None:
    """Under `pulumi preview --policy-pack`, stack-identity knows the stack from the resources' URNs: dev's example
    key is an info there as in `gb300 plan`, not the warning a stack of another name gets."""
    from pulumi_policy import StackValidationArgs  # noqa: PLC0415

    from gb300 import policy_pack  # noqa: PLC0415
    from tests.rules.test_policy_pack import policy_resource  # noqa: PLC0415

    args = StackValidationArgs([policy_resource(r) for r in dev_plan.resources], {}, {})
    ctx = policy_pack._context(args, args.resources, dev_plan.config.policy, lambda: dev_plan.config)
    assert ctx.stack == "dev"
    [finding] = identity.stack_identity.evaluate(args.resources, ctx)
    assert finding.level is Level.INFO
