"""Every Azure resource the program declares is an instance of its pulumi-azure-native typed class."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from gb300.plan import runner


@pytest.fixture(scope="module")
def declared(reference_raw: dict[str, Any], dev_raw: dict[str, Any]) -> dict[str, dict[str, set[type]]]:
    """Per stack: each azure-native type token the program registers -> the Python classes that registered it."""
    original = pulumi.CustomResource.__init__
    seen: dict[str, set[type]] = {}

    def spy(self: pulumi.CustomResource, t: str, *args: Any, **kwargs: Any) -> None:
        if t.startswith("azure-native:"):
            seen.setdefault(t, set()).add(type(self))
        original(self, t, *args, **kwargs)

    by_stack = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pulumi.CustomResource, "__init__", spy)
        for stack, raw in (("reference", reference_raw), ("dev", dev_raw)):
            runner.register(stack, raw)
            by_stack[stack] = dict(seen)
            seen.clear()
    return by_stack


@pytest.mark.parametrize("stack", ["reference", "dev"])
def test_every_azure_resource_is_declared_through_its_typed_class(
    stack: str, declared: dict[str, dict[str, set[type]]]
) -> None:
    """Each azure-native resource of a shipped stack is constructed as the pulumi-azure-native class whose type
    token it registers (``network.Subnet`` for ``azure-native:network:Subnet``), not by type token and dicts."""
    typed = declared[stack]
    assert "azure-native:network:InterconnectGroup" in typed or stack == "dev"
    assert len(typed) >= 15  # network, storage, Key Vault, monitoring, the head node ...
    wrong = {
        t: sorted(f"{c.__module__}.{c.__qualname__}" for c in classes)
        for t, classes in typed.items()
        if any(not c.__module__.startswith("pulumi_azure_native.") or pulumi.get_type_token(c) != t for c in classes)
    }
    assert not wrong


def test_planning_computes_no_version_alias(monkeypatch: pytest.MonkeyPatch, dev_raw: dict[str, Any]) -> None:
    """The program drops the typed classes' per-API-version aliases before the SDK turns them into URNs
    (program.drop_version_aliases): at 1,388 racks they doubled the plan's CPU and memory. The one alias gb300 gives
    itself stays: each rack's logs association keeps its URN from before racks were components."""
    import pulumi.resource as sdk_resource  # noqa: PLC0415 - patched where Resource.__init__ looks it up

    collapsed: list[Any] = []
    original = sdk_resource.collapse_alias_to_urn

    def counting(*args: Any, **kwargs: Any) -> Any:
        collapsed.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(sdk_resource, "collapse_alias_to_urn", counting)
    records = runner.register("dev", dev_raw)
    assert any(r.type == "azure-native:network:VirtualNetwork" for r in records)  # its typed class has 60 aliases
    racks = [r for r in records if r.type == "gb300:compute:Rack"]
    assert racks
    assert sorted(a.name for a in collapsed) == [f"dev-train-{i:04d}-logs" for i in range(1, len(racks) + 1)]
