"""The one Jinja environment every node file and Slurm configuration is rendered with (``templates/``).

StrictUndefined (a missing value is an error, never an empty string), block tags that leave no blank lines,
files that keep their trailing newline, and a ``shquote`` filter for shell env files. No HTML is rendered.

Every value a template prints goes through :func:`gb300.io.quoting.checked` (the environment's ``finalize``): a
value holding a newline, NUL or another control character, or longer than 64 KiB, is refused
(:class:`~gb300.io.quoting.UnsafeTextError`, exit 2) rather than end a line of a script, an env file, a systemd unit
or a Slurm file; ``shquote`` is :func:`gb300.io.quoting.shell_word`.
"""

from __future__ import annotations

import functools
from typing import Any

import jinja2

from gb300.io import quoting
from gb300.paths import TEMPLATES_DIR

_WHAT = "a value rendered into a node or Slurm file"


def _finalize(value: Any) -> Any:
    return quoting.checked(value, _WHAT) if isinstance(value, str) else value


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
        finalize=_finalize,
    )
    env.filters["shquote"] = lambda value: quoting.shell_word(str(value), _WHAT)
    return env


def render(name: str, **context: Any) -> str:
    """Render ``templates/<name>`` with ``context``."""
    return environment().get_template(name).render(**context)
