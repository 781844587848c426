"""The stack outputs a new user follows from `pulumi up` to a shell on the head (docs/first-login.md)."""

from __future__ import annotations

import copy
import shlex
from typing import Any

import pulumi

from gb300 import config
from gb300.program import first_login_outputs

HEAD_ID = "/subscriptions/s/resourceGroups/rg-ref/providers/Microsoft.Compute/virtualMachines/ref-head"


@pulumi.runtime.test
def test_login_command_names_the_bastion_the_head_and_the_admin(reference_raw: dict[str, Any]) -> Any:
    """`pulumi stack output loginCommand` is a complete `az network bastion ssh` line for this stack's head."""
    cfg = config.parse(copy.deepcopy(reference_raw))
    out = first_login_outputs(cfg, "rg-ref", pulumi.Output.from_input("ref-bastion"), HEAD_ID)

    def check(command: str) -> None:
        argv = shlex.split(command)
        assert argv[:4] == ["az", "network", "bastion", "ssh"]
        options = dict(zip(argv[4::2], argv[5::2], strict=True))
        assert options["--name"] == "ref-bastion"
        assert options["--resource-group"] == "rg-ref"
        assert options["--target-resource-id"] == HEAD_ID
        assert options["--username"] == cfg.access.admin_username
        assert options["--auth-type"] == "ssh-key"

    assert out["adminUsername"] == cfg.access.admin_username
    return pulumi.Output.from_input(out["loginCommand"]).apply(check)


def test_without_bastion_the_output_says_how_to_get_in(reference_raw: dict[str, Any]) -> None:
    """With gb300:network.bastion false there is no Bastion to name: the output names the key to change."""
    raw = copy.deepcopy(reference_raw)
    raw["network"] = {**raw.get("network", {}), "bastion": False}
    out = first_login_outputs(config.parse(raw), "rg", None, HEAD_ID)
    assert "bastionName" not in out
    assert "gb300:network.bastion" in out["loginCommand"]
