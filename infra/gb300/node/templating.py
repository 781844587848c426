"""The one Jinja environment every node file and Slurm configuration is rendered with (``templates/``).

StrictUndefined (a missing value is an error, never an empty string), block tags that leave no blank lines,
files that keep their trailing newline, and a ``shquote`` filter for shell env files. No HTML is rendered.
"""

from __future__ import annotations

import functools
import shlex
from typing import Any

import jinja2

from gb300.paths import TEMPLATES_DIR


@functools.cache
def environment() -> jinja2.Environment:
    """The shared environment over ``templates/``."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # noqa: S701 - shell env files, YAML and Slurm configuration, never HTML
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["shquote"] = lambda value: shlex.quote(str(value))
    return env


def render(name: str, **context: Any) -> str:
    """Render ``templates/<name>`` with ``context``."""
    return environment().get_template(name).render(**context)
