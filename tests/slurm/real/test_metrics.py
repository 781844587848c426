"""Slurm's own metrics against real slurmctld: with gb300's slurm.conf (``MetricsType=metrics/openmetrics``) 26.05
serves every endpoint and every metric name data/metrics.yaml lists for it, in text promtool reads; 24.11 has no
metrics plugin, as the data file says."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from gb300.paths import DATA_DIR
from tests.support.real_slurm.cluster import Cluster

SCRAPE = """
import sys, urllib.request, urllib.error
try:
    with urllib.request.urlopen(sys.argv[1], timeout=10) as answer:
        print(answer.status)
        sys.stdout.write(answer.read().decode())
except urllib.error.HTTPError as error:
    print(error.code)
except OSError as error:
    print("unreachable", error)
"""


def _slurmctld() -> dict[str, object]:
    return yaml.safe_load((DATA_DIR / "metrics.yaml").read_text())["exporters"]["slurmctld"]  # type: ignore[no-any-return]


def _scrape(cluster: Cluster, path: str) -> tuple[str, str]:
    """The status line and the body slurmctld answers at ``path`` on its port, asked from the head."""
    url = f"http://{cluster.head.address}:{_slurmctld()['port']}{path}"
    out = cluster.head.run(["python3", "-c", SCRAPE, url], timeout=30).stdout
    status, _, body = out.partition("\n")
    return status, body


def _names(body: str) -> set[str]:
    """Metric names of an OpenMetrics/Prometheus text body: its TYPE lines and its samples."""
    names = set(re.findall(r"^# TYPE (\S+)", body, re.MULTILINE))
    names |= set(re.findall(r"^([A-Za-z_:][A-Za-z0-9_:]*)[{ ]", body, re.MULTILINE))
    return names


def _busy(cluster: Cluster) -> None:
    """A job running and one pending, so the job, user and account series have something to count."""
    pool = cluster.files.pool
    for _ in range(2):
        cluster.head.run(["sbatch", f"--partition={pool}", "-N2", "--wrap", "sleep 60", "-o", "/dev/null"])


def test_slurmctld_serves_every_listed_metric(real_cluster: Cluster) -> None:
    """On 26.05 each endpoint of data/metrics.yaml answers 200 on slurmctld's port with exactly the metric names and
    labels listed for it; on 24.11 (no metrics plugin) none answers, which the data file records under missingIn."""
    spec = _slurmctld()
    endpoints: dict[str, dict[str, list[str]]] = spec["endpoints"]  # type: ignore[assignment]
    if real_cluster.version.startswith("24."):
        assert "24.11" in spec["missingIn"]  # type: ignore[operator]
        assert "MetricsType=" not in (real_cluster.head.upper / "etc/slurm/slurm.conf").read_text()
        status, _ = _scrape(real_cluster, next(iter(endpoints)))
        assert status != "200"
        return
    assert "MetricsType=metrics/openmetrics" in (real_cluster.head.upper / "etc/slurm/slurm.conf").read_text()
    _busy(real_cluster)
    for path, listed in endpoints.items():
        status, body = _scrape(real_cluster, path)
        assert status == "200", (path, status, body[:300])
        assert _names(body) == set(listed["names"]), path
        assert set(re.findall(r"[{,](\w+)=", body)) == set(listed["labels"]), path
    assert set(spec["metrics"]) == set().union(*(set(e["names"]) for e in endpoints.values()))  # type: ignore[arg-type]


@pytest.mark.skipif(shutil.which("promtool") is None, reason="no promtool (scripts/ensure-test-tools installs it)")
def test_promtool_finds_nothing_in_what_slurmctld_serves(real_cluster: Cluster) -> None:
    """promtool check metrics reads every endpoint's text on 26.05 and reports no problem (exit 0, no output)."""
    if real_cluster.version.startswith("24."):
        pytest.skip("24.11 serves no metrics (data/metrics.yaml missingIn)")
    for path in _slurmctld()["endpoints"]:  # type: ignore[attr-defined]
        _, body = _scrape(real_cluster, path)
        done = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True, check=False)
        assert (done.returncode, done.stdout + done.stderr) == (0, ""), path
