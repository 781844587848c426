"""One render per plan: `gb300 plan` parses the stack once and renders each role's bundle once, and the program,
the summary and the uploader read the same render (gb300.node.custom_data.render_stack)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gb300 import cli, config
from gb300.node import context as node_context
from gb300.node import custom_data
from gb300.node.bundle import Bundle
from gb300.ops import payload_publish


def test_one_plan_parses_the_stack_once_and_renders_each_role_once(
    monkeypatch: pytest.MonkeyPatch, dev_raw: dict[str, Any]
) -> None:
    """During one `gb300 plan --stack dev` the stack is parsed once and each role's bundle rendered once (the
    program, the summary's payload sizes and the custom data checks share it)."""
    parses: list[object] = []
    bundles: list[str] = []
    parse, bundle_for = config.parse, custom_data.bundle_for

    def counted_parse(raw: Any) -> config.StackConfig:
        parses.append(raw)
        return parse(raw)

    def counted_bundle(ctx: Any, **kwargs: Any) -> Bundle:
        bundles.append(f"{ctx.role}/{ctx.pool_name}")
        return bundle_for(ctx, **kwargs)

    monkeypatch.setattr(config, "parse", counted_parse)
    monkeypatch.setattr(custom_data, "bundle_for", counted_bundle)
    assert cli.main(["plan", "--stack", "dev", "--quiet"]) == 0
    assert len(parses) == 1
    dev = parse(copy.deepcopy(dev_raw))
    roles = [f"{node_context.HEAD}/{node_context.HEAD}"] + [f"{node_context.GPU_NODE}/{p.name}" for p in dev.gpu_pools]
    assert sorted(bundles) == sorted(roles)


def test_the_uploader_and_the_program_read_one_render(dev_raw: dict[str, Any]) -> None:
    """Rendered twice from one config object, the stack is the same render; a new parse renders the same bytes."""
    cfg = config.parse(copy.deepcopy(dev_raw))
    first = custom_data.render_stack(cfg)
    assert custom_data.render_stack(cfg) is first
    assert payload_publish.render(cfg) == first.all
    again = custom_data.render_stack(config.parse(copy.deepcopy(dev_raw)))
    assert again is not first
    assert [(d.sha256, d.payload.sha256) for d in again.all] == [(d.sha256, d.payload.sha256) for d in first.all]
