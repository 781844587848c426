"""What a user sees for a stack that does not parse: the lines of the :class:`~gb300.errors.ConfigError`."""

from __future__ import annotations

from typing import Any

import pytest

from gb300 import config
from gb300.errors import ConfigError


def error_lines(raw: dict[str, Any]) -> list[str]:
    """The lines ``config.parse(raw)`` reports, one per problem; fails the test when ``raw`` parses."""
    with pytest.raises(ConfigError) as info:
        config.parse(raw)
    return str(info.value).splitlines()
