"""``gb300:login`` and ``gb300:access.entra``: each mistake is one key-path line (exit 2 from the CLI), and the example
stack with two accounts, an Entra users group and two login nodes plans clean, granting the groups their login
roles on the login VMs and nowhere else."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli, config
from gb300.config import stacks as gb300_stacks
from gb300.facts import roles
from gb300.paths import REPO_ROOT
from tests.support.config_errors import error_lines

EXAMPLE = REPO_ROOT / "examples" / "access" / "Pulumi.access.yaml"
USERS = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
ADMINS = "7c9e6679-7425-40de-944b-e07fc1f90ae7"


def _with(dev_raw: dict[str, Any], **sections: Any) -> dict[str, Any]:
    raw = copy.deepcopy(dev_raw)
    for key, value in sections.items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    return raw


def _access(dev_raw: dict[str, Any], **entra: Any) -> dict[str, Any]:
    return {**dev_raw["access"], "entra": entra}


@pytest.mark.parametrize(
    ("entra", "login", "network", "line"),
    [
        ({"userGroups": ["lab-users"]}, {}, None,
         "gb300:access.entra.userGroups[0]: must be an Entra group object ID, a GUID such as "
         "'00000000-0000-0000-0000-000000000000' (got 'lab-users')"),
        ({"userGroups": [USERS], "adminGroups": [USERS]}, {}, None,
         f"gb300:access.entra.adminGroups[0]: repeats userGroups[0] (got '{USERS}'); list each group once"),
        ({"userGroups": []}, {}, None,
         "gb300:access.entra.userGroups: must have at least 1 item(s) (got 0)"),
        (None, {}, None,
         "gb300:access.entra.userGroups: is required with gb300:login: the Entra group object IDs whose members sign "
         "in to the login nodes (the admin key does not log in there)"),
        ({"userGroups": [USERS]}, {}, {"bastion": False},
         "gb300:network.bastion: is false, but gb300:login needs a Bastion: the login nodes have no public address; "
         "set gb300:network.bastion: true"),
        ({"userGroups": [USERS]}, None, None,
         "gb300:access.entra: needs gb300:login: Entra sign-in is installed on the login nodes only (the head stays "
         "the controller); declare gb300:login"),
        ({"userGroups": [USERS]}, {"vmSize": "Standard_D16pds_v5"}, None,
         "gb300:login.vmSize: must be an x86_64 size (got 'Standard_D16pds_v5', arm64): Microsoft documents Entra "
         "sign-in (AADSSHLoginForLinux) for no other architecture (data/entra.yaml)"),
    ],
)  # fmt: skip
def test_a_sign_in_mistake_is_one_key_path_line(
    dev_raw: dict[str, Any],
    entra: dict[str, Any] | None,
    login: dict[str, Any] | None,
    network: dict[str, Any] | None,
    line: str,
) -> None:
    """A group that is no GUID, a group listed twice, login nodes without sign-in or without Bastion, sign-in
    without login nodes, and a login size Entra sign-in is not documented for are each one line at their key path."""
    access = _access(dev_raw, **entra) if entra is not None else dev_raw["access"]
    raw = _with(dev_raw, access=access, login=login, network=network)
    assert error_lines(raw) == [line]


def test_a_sign_in_mistake_exits_two_without_a_traceback(
    dev_raw: dict[str, Any], write_stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gb300 plan` of a stack with login nodes and no Entra groups exits 2 with the key-path line."""
    path = write_stack(_with(dev_raw, login={"count": 2}))
    assert cli.main(["plan", "--stack-file", str(path)]) == 2
    err = capsys.readouterr().err
    assert "gb300:access.entra.userGroups: is required with gb300:login" in err
    assert "Traceback" not in err


def test_the_shipped_stacks_have_no_login_nodes() -> None:
    """Without gb300:login, users log in on the head as before: no shipped stack declares login nodes."""
    for name in gb300_stacks.stack_names():
        assert config.parse(config.load_stack_file(gb300_stacks.stack_file(name))).login is None


@pytest.fixture(scope="module")
def example_plan(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The access example's plan JSON resources (planned once for this module)."""
    out = tmp_path_factory.mktemp("access") / "plan.json"
    assert cli.main(["plan", "--stack-file", str(EXAMPLE), "--json", str(out), "--quiet"]) == 0
    resources: list[dict[str, Any]] = json.loads(Path(out).read_text())["resources"]
    return resources


def _of(resources: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in resources if r["type"] == f"azure-native:{kind}"]


def test_the_example_declares_two_login_vms_with_entra_sign_in(example_plan: list[dict[str, Any]]) -> None:
    """examples/access plans two login VMs, each with a system-assigned identity and the AADSSHLoginForLinux
    extension of Microsoft.Azure.ActiveDirectory."""
    vms = {r["name"]: r["inputs"] for r in _of(example_plan, "compute:VirtualMachine")}
    logins = sorted(name for name in vms if "-login-" in name)
    assert logins == ["lab-login-0", "lab-login-1"]
    for name in logins:
        assert vms[name]["identity"]["type"] == "SystemAssigned, UserAssigned"
        assert "publicIPAddress" not in json.dumps(vms[name])
    entra = [r["inputs"] for r in _of(example_plan, "compute:VirtualMachineExtension") if r["name"].endswith("-entra")]
    assert sorted(e["vmName"] for e in entra) == logins
    assert {(e["publisher"], e["type"]) for e in entra} == {("Microsoft.Azure.ActiveDirectory", "AADSSHLoginForLinux")}


def test_the_groups_hold_their_login_roles_on_the_login_vms_only(example_plan: list[dict[str, Any]]) -> None:
    """Each Entra group holds its role (users: Virtual Machine User Login, admins: Virtual Machine Administrator
    Login) on each login VM, scoped to that VM: no grant on the resource group, the head or anything else."""
    grants = [r["inputs"] for r in _of(example_plan, "authorization:RoleAssignment") if r["inputs"]["principalId"]
              in (USERS, ADMINS)]  # fmt: skip
    user, admin = (
        roles.definition_id("Virtual Machine User Login"),
        roles.definition_id("Virtual Machine Administrator Login"),
    )
    seen = {
        (g["principalId"], g["roleDefinitionId"], g["scope"].rsplit("/", 1)[-1], g["principalType"]) for g in grants
    }
    assert seen == {
        (group, role, vm, "Group")
        for group, role in ((USERS, user), (ADMINS, admin))
        for vm in ("lab-login-0", "lab-login-1")
    }
    assert all("/providers/Microsoft.Compute/virtualMachines/" in g["scope"] for g in grants)
    assert len(grants) == len(seen)
