"""pytest glue for the real-Slurm cluster: skip (or, under CI, fail) where this machine cannot run it, and one
cluster per test module and release."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.real_slurm.cluster import Cluster, start_cluster
from tests.support.real_slurm.root import SUITES, unavailable

RELEASES = pytest.mark.parametrize("suite", list(SUITES), ids=[f"{s}-{v}" for s, v in SUITES.items()])


def require_real_slurm() -> None:
    """Skip with the reason where this machine cannot run the cluster; under CI (``CI`` set), fail instead."""
    reason = unavailable()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"real-Slurm tests must run in CI: {reason}")
    pytest.skip(reason)


def cluster_fixture(request: pytest.FixtureRequest, **options: Any) -> Iterator[Cluster]:
    """The body of a module-scoped fixture parametrized by suite (``request.param``): a started cluster,
    stopped after the module. ``options`` go to :func:`~tests.support.real_slurm.cluster.start_cluster`."""
    require_real_slurm()
    factory = request.getfixturevalue("tmp_path_factory")
    directory = factory.mktemp(f"real-slurm-{request.param}")
    with start_cluster(request.param, directory / "cluster", **options) as cluster:
        yield cluster
