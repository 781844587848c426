"""System tools the tests call for real (installed by scripts/ensure-test-tools)."""

from __future__ import annotations

import os
import shutil

import pytest

__all__ = ["CLOUD_INIT_MISSING", "require_tool"]


def require_tool(name: str, missing: str) -> str:
    """The path of ``name``; when it is absent, the test fails under CI (where ensure-test-tools must have
    installed it) and is skipped elsewhere, with ``missing`` as the reason."""
    found = shutil.which(name)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    return found


CLOUD_INIT_MISSING = "Debian's cloud-init is not installed (scripts/ensure-test-tools installs it)"
