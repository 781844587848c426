"""Render a role's cloud-config as data, serialize it with yaml, and pack it as Azure custom data.

The cloud-config is a dict built here: the role fragments' keys, `write_files` (the step library, the
step scripts, the templated files and, for a role that gets /etc/gb300/versions.env, the build recipes
of its `install: source` components), and `runcmd` (one list-form entry per step, in steps.yaml
order). Only file contents come from Jinja templates. The result is gzip-compressed (cloud-init
accepts gzip user data) and base64-encoded, and must stay under Azure's 64 KB custom data limit.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import yaml

from gb300.bootstrap.context import BootstrapContext
from gb300.bootstrap.errors import BootstrapError
from gb300.bootstrap.resources import CLOUD_INIT_DIR, TEMPLATES_DIR
from gb300.bootstrap.secrets import find_secret_material
from gb300.bootstrap.steps import Step, load_role, steps_for_role

__all__ = [
    "AZURE_CUSTOM_DATA_LIMIT",
    "CUSTOM_DATA_HASH_TAG",
    "LIB_DIR",
    "RUN_STEP",
    "RenderedCustomData",
    "build_cloud_config",
    "render_custom_data",
]

AZURE_CUSTOM_DATA_LIMIT = 65_536
"""Azure's limit on base64 custom data, in bytes (azure-compute-docs virtual-machines/custom-data.md)."""
CUSTOM_DATA_HASH_TAG = "gb300-custom-data-sha256"
"""The scale set tag that carries `RenderedCustomData.sha256`; a differing value means reimage."""
LIB_DIR = "/usr/local/lib/gb300"
RUN_STEP = f"{LIB_DIR}/run-step"
VERSIONS_ENV = "/etc/gb300/versions.env"
_HEADER = "#cloud-config\n"


@dataclass(frozen=True)
class RenderedCustomData:
    """A role's rendered bootstrap: the cloud-config text and what goes on the scale set."""

    role: str
    cloud_config: str
    custom_data: str
    """base64 of the gzip-compressed cloud-config: the scale set's `customData`."""
    size_bytes: int
    """Length of `custom_data`, the figure Azure's 64 KB limit applies to."""
    sha256: str
    """Hex sha256 of `cloud_config`: put it on the scale set as a tag; a change means reimage."""

    @property
    def short_hash(self) -> str:
        """The first 12 hex digits of `sha256`, short enough for a tag value or a plan line."""
        return self.sha256[:12]


class _LiteralDumper(yaml.SafeDumper):
    """A SafeDumper that writes multi-line strings as literal blocks, so goldens read like files."""


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_LiteralDumper.add_representer(str, _str_presenter)


def _jinja_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "xml"), default_for_string=False),
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["shquote"] = lambda value: shlex.quote(str(value))
    return env


def _file_entry(path: str, content: str, permissions: str) -> dict[str, Any]:
    return {"path": path, "owner": "root:root", "permissions": permissions, "content": content}


@dataclass(frozen=True)
class _PlacedStep:
    name: str
    content: str


def _ordered_steps(ctx: BootstrapContext, cloud_init_dir: Path, env: jinja2.Environment) -> list[_PlacedStep]:
    """steps.yaml's steps for the role, with the context's extra steps before the final 99-* step(s)."""
    own: tuple[Step, ...] = steps_for_role(ctx.role, cloud_init_dir)
    placed = [_PlacedStep(s.name, (cloud_init_dir / "scripts" / s.script).read_text(encoding="utf-8")) for s in own]
    names = {s.name for s in own}
    extra = []
    for step in ctx.extra_steps:
        if step.name in names:
            msg = f"extra step {step.name!r} has the name of a step in steps.yaml; pick another name"
            raise BootstrapError(msg)
        extra.append(_PlacedStep(step.name, env.get_template("extra-step.sh.j2").render(step=step)))
    cut = next((i for i, s in enumerate(placed) if s.name.startswith("99-")), len(placed))
    return [*placed[:cut], *extra, *placed[cut:]]


def _build_recipes(ctx: BootstrapContext, cloud_init_dir: Path) -> list[dict[str, Any]]:
    """The build recipes (cloud-init/build/) of the `install: source` components, for a role given the pins."""
    entries = []
    for comp in ctx.software.components:
        if comp.install != "source" or comp.recipe is None:
            continue
        source = cloud_init_dir / "build" / f"{comp.recipe}.sh"
        if not source.is_file():
            msg = f"versions.yaml components.{comp.name}.recipe: no build recipe {source} (got {comp.recipe!r})"
            raise BootstrapError(msg)
        entries.append(_file_entry(f"{LIB_DIR}/build/{comp.recipe}.sh", source.read_text(encoding="utf-8"), "0755"))
    return entries


def build_cloud_config(ctx: BootstrapContext, cloud_init_dir: Path = CLOUD_INIT_DIR) -> dict[str, Any]:
    """The role's cloud-config as a dict (what `render_custom_data` serializes)."""
    common, fragment = load_role(ctx.role, cloud_init_dir)
    env = _jinja_env()
    steps = _ordered_steps(ctx, cloud_init_dir, env)
    variables = {"ctx": ctx, "software": ctx.software, "node": ctx.node, "nccl": ctx.nccl, "steps": steps}

    config: dict[str, Any] = {}
    config.update(common.cloud_config)
    config.update(fragment.cloud_config)
    write_files = [
        _file_entry(f"{LIB_DIR}/lib.sh", (cloud_init_dir / "lib/gb300-lib.sh").read_text(encoding="utf-8"), "0644"),
        _file_entry(RUN_STEP, (cloud_init_dir / "lib/run-step").read_text(encoding="utf-8"), "0755"),
    ]
    for spec in (*common.files, *fragment.files):
        content = env.get_template(spec.template).render(variables)
        write_files.append(_file_entry(spec.path, content, spec.permissions))
    if VERSIONS_ENV in (entry["path"] for entry in write_files):
        write_files.extend(_build_recipes(ctx, cloud_init_dir))
    write_files.extend(_file_entry(f.path, f.content, f.permissions) for f in ctx.extra_files)
    write_files.extend(_file_entry(f"{LIB_DIR}/steps/{step.name}.sh", step.content, "0755") for step in steps)
    paths = [entry["path"] for entry in write_files]
    duplicates = sorted({p for p in paths if paths.count(p) > 1})
    if duplicates:
        msg = f"custom data for role {ctx.role!r} places these paths twice: {', '.join(duplicates)}"
        raise BootstrapError(msg)
    config["write_files"] = write_files
    config["runcmd"] = [[RUN_STEP, step.name] for step in steps]
    return config


def render_custom_data(ctx: BootstrapContext, cloud_init_dir: Path = CLOUD_INIT_DIR) -> RenderedCustomData:
    """Render `ctx.role`'s cloud-config for one pool and pack it as Azure custom data.

    `cloud_init_dir` defaults to the repository's cloud-init/ (tests point it at a modified copy).
    Raises BootstrapError when the result carries secret-looking material or exceeds 64 KB.
    """
    config = build_cloud_config(ctx, cloud_init_dir)
    body = yaml.dump(config, Dumper=_LiteralDumper, sort_keys=False, width=120, allow_unicode=False)
    text = (
        _HEADER
        + f"# gb300 bootstrap for role {ctx.role}, pool {ctx.pool_name}, cluster {ctx.cluster_name}.\n"
        + "# Generated from cloud-init/, templates/ and infra/gb300/data/: edit those, not this.\n"
        + body
    )
    found = find_secret_material(text)
    if found:
        msg = (
            f"custom data for role {ctx.role!r} must not carry secrets (found: {', '.join(found)}). "
            "Fetch them at boot with the node's managed identity."
        )
        raise BootstrapError(msg)
    packed = base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")
    if len(packed) > AZURE_CUSTOM_DATA_LIMIT:
        msg = (
            f"custom data for role {ctx.role!r} must be at most {AZURE_CUSTOM_DATA_LIMIT} bytes of base64 "
            f"(got {len(packed)}). Move content into the image or fetch it at boot."
        )
        raise BootstrapError(msg)
    return RenderedCustomData(
        role=ctx.role,
        cloud_config=text,
        custom_data=packed,
        size_bytes=len(packed),
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )
