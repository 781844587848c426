"""Fixtures of the real-Slurm tests: one cluster (head + 2 dynamic GPU nodes of the dev stack) per test module
and Debian release (trixie: Slurm 24.11, sid: Slurm 26.05)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.real_slurm.cluster import Cluster
from tests.support.real_slurm.fixtures import cluster_fixture
from tests.support.real_slurm.root import SUITES


@pytest.fixture(scope="module", params=list(SUITES), ids=[f"{s}-{v}" for s, v in SUITES.items()])
def real_cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A running cluster of the dev stack, two GPU nodes, accounting off; shared by the tests of a module."""
    yield from cluster_fixture(request)
