"""Components built from pinned source at boot (`install: source`), on a plain Ubuntu node in the sandbox."""

from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from gb300.facts.software import VERSIONS_FILE, load_software
from gb300.node.boot_context import BootstrapContext
from gb300.node.custom_data import render_custom_data
from tests.support.bootstrap_helpers import REFERENCE_CLUSTER
from tests.support.files import FIXTURES
from tests.support.sandbox import (
    DOCA_HOST_URL,
    Machine,
    Sandbox,
    TwoRuns,
    booted_into_grace_kernel,
    plain_ubuntu_machine,
    run_twice,
    serve_doca_host,
)

pytestmark = pytest.mark.slow

NCCL_TESTS_URL = "https://github.com/NVIDIA/nccl-tests/archive/v2.17.6.tar.gz"
PLUGIN_URL = "https://github.com/Mellanox/nccl-rdma-sharp-plugins/archive/refs/tags/v2.7.1.tar.gz"
SPACK_SHA256 = "38974e70342150ede0e3fb8fd24bfe60ccbde90fa20241716ba8bb338e6b61a0"
# The plugin's configure (a stand-in in the tarball) tells the stand-in `make install` its prefix.
_PLUGIN_CONFIGURE = (
    '#!/bin/sh\nfor a; do case "$a" in --prefix=*) echo "${a#--prefix=}" >standin-prefix ;; esac; done\n'
)


def _tarball(path: Path, top: str, files: dict[str, str]) -> str:
    """Write a source tarball with one top directory, as GitHub serves them; return its sha256."""
    with tarfile.open(path, "w:gz") as tar:
        for name, content in files.items():
            data = content.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


KEYS = FIXTURES / "keys"
REPO_KEY_FPR = "C08AF28EE2631D8C289BEAC2E32B5DBF675A3747"  # gpg --show-keys tests/fixtures/keys/repo-signing.asc


def _plain_node(
    tmp_path: Path,
    files: dict[str, str | None],
    machine: Machine | None = None,
    edit: dict[str, dict[str, Any]] | None = None,
) -> Sandbox:
    """A plain Ubuntu node: every repository key pinned (and served) as the fixture key, `files` (URL -> sha256,
    None for no pin) as the file pins, and `edit` applied to versions.yaml's components."""
    machine = booted_into_grace_kernel(machine or plain_ubuntu_machine())
    files = {**files, DOCA_HOST_URL: serve_doca_host(machine, tmp_path)}
    repos = load_software().repos
    machine.downloads.update({r.key_url: str(KEYS / "repo-signing.asc") for r in repos})
    keys = {r.key_url: {"fingerprints": [REPO_KEY_FPR], "status": "verified", "source": "test"} for r in repos}
    pins = {url: {"sha256": sha, "status": "verified", "source": "test"} for url, sha in files.items() if sha}
    checksums = tmp_path / "checksums.yaml"
    checksums.write_text(yaml.safe_dump({"files": pins, "keys": keys}))
    raw = yaml.safe_load(VERSIONS_FILE.read_text())
    for name, fields in (edit or {}).items():
        raw["components"][name].update(fields)
    versions = tmp_path / "versions.yaml"
    versions.write_text(yaml.safe_dump(raw, sort_keys=False))
    software = load_software(versions, checksums)
    ctx = BootstrapContext(role="gpu-node", cluster_name=REFERENCE_CLUSTER, pool_name="gpu-a", software=software)
    return Sandbox(tmp_path / "node", render_custom_data(ctx).cloud_config, machine)


def _served_nccl_tests(tmp_path: Path) -> tuple[Machine, str]:
    """A plain Ubuntu machine whose network serves a stand-in nccl-tests 2.17.6 tarball; and its sha256."""
    tarball = tmp_path / "nccl-tests-2.17.6.tar.gz"
    sha = _tarball(tarball, "nccl-tests-2.17.6", {"Makefile": "default: src.build\n", "src/common.h": ""})
    machine = plain_ubuntu_machine()
    machine.downloads = {NCCL_TESTS_URL: str(tarball)}
    return machine, sha


def _status(box: Sandbox) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in box.read("/var/lib/gb300/status").splitlines())


def _mutations(calls: list[str], command: str) -> list[str]:
    return [c for c in calls if c.startswith(f"MUTATE {command} ")]


@pytest.fixture(scope="module")
def plain_node_run_twice(tmp_path_factory: pytest.TempPathFactory) -> TwoRuns:
    """One plain Ubuntu node whose nccl-tests pin matches the served tarball, run twice."""
    tmp_path = tmp_path_factory.mktemp("plain")
    machine, sha = _served_nccl_tests(tmp_path)
    return run_twice(_plain_node(tmp_path, {NCCL_TESTS_URL: sha}, machine))


def test_plain_ubuntu_builds_nccl_tests_from_the_checked_tarball(plain_node_run_twice: TwoRuns) -> None:
    """nccl-tests is downloaded, checked, built with MPI for sm_103 and installed where the image keeps it."""
    run = plain_node_run_twice
    assert run.first.ok, run.first.output
    assert _status(run.box) == {"state": "ready"}
    assert [c.split()[-1] for c in _mutations(run.calls_in_first, "curl") if "nccl" in c] == [NCCL_TESTS_URL]
    builds = _mutations(run.calls_in_first, "make")
    assert len(builds) == 1
    root = str(run.box.root)
    for arg in (
        "MPI=1",
        f"MPI_HOME={root}/usr/lib/aarch64-linux-gnu/openmpi",
        f"CUDA_HOME={root}/usr/local/cuda-13.0",
        f"NCCL_HOME={root}/usr",
        "NVCC_GENCODE=-gencode=arch=compute_103,code=sm_103",
    ):
        assert arg in builds[0].split()
    apt = " ".join(_mutations(run.calls_in_first, "apt-get"))
    assert "build-essential libopenmpi-dev openmpi-bin" in apt
    perf = run.box.path("/opt/nccl-tests/build/all_reduce_perf")
    assert perf.read_text() == "ELF stand-in built with -gencode=arch=compute_103,code=sm_103\n"
    assert run.box.path("/var/lib/gb300/downloads/nccl-tests/v2.17.6.tar.gz").is_file()
    assert not run.box.path("/var/lib/gb300/build/nccl-tests-2.17.6").exists(), "the build tree is cleaned up"


def test_an_unpinned_optional_plugin_is_recorded_absent_not_fatal(plain_node_run_twice: TwoRuns) -> None:
    """With no version or sha256 for the sharp plugin the node still becomes ready; record and journal say why."""
    box = plain_node_run_twice.box
    why = "infra/gb300/data/versions.yaml pins no version for it, so there is nothing to download"
    record = box.read("/var/lib/gb300/steps/40-nccl.done").splitlines()
    assert f"nccl-rdma-sharp-plugins absent (optional): {why}" in record
    assert "nccl-tests present, pin 2.17.6 not readable" in record
    journal = (box.base / "journal.log").read_text()
    assert f"gb300-40-nccl: WARNING: nccl-rdma-sharp-plugins absent (optional): {why}" in journal
    assert not [c for c in plain_node_run_twice.calls_in_first if "nccl-rdma-sharp-plugins" in c]


def test_second_run_neither_downloads_nor_builds(plain_node_run_twice: TwoRuns) -> None:
    """Run again, the node finds nccl-tests at its detect path: no download, no build, no file changes."""
    run = plain_node_run_twice
    assert run.second.ok, run.second.output
    assert _mutations(run.calls_in_second, "curl") == []
    assert _mutations(run.calls_in_second, "make") == []
    assert _mutations(run.calls_in_second, "apt-get") == []
    assert run.box.snapshot() == run.snapshot_after_first


def test_a_tarball_that_does_not_match_its_pin_fails_before_building(tmp_path: Path) -> None:
    """A served tarball whose sha256 is not the pinned one (Spack's) fails with a checksum mismatch, unbuilt."""
    machine, _ = _served_nccl_tests(tmp_path)
    box = _plain_node(tmp_path, {NCCL_TESTS_URL: SPACK_SHA256}, machine)
    assert not box.run().ok
    status = _status(box)
    assert status["step"] == "40-nccl"
    assert status["reason"] == f"checksum mismatch for {NCCL_TESTS_URL}: expected sha256 {SPACK_SHA256}"
    assert _mutations(box.calls(), "make") == []
    assert not box.path("/opt/nccl-tests/build").exists()
    assert not box.path("/var/lib/gb300/build/nccl-tests-2.17.6").exists()
    assert not box.path("/var/lib/gb300/bootstrap.done").exists()


def test_a_source_component_without_sha256_is_not_downloaded(tmp_path: Path) -> None:
    """nccl-tests (not optional) with sha256 null fails at 40-nccl with the usual refusal and fetches nothing."""
    machine, _ = _served_nccl_tests(tmp_path)
    box = _plain_node(tmp_path, {NCCL_TESTS_URL: None}, machine)
    assert not box.run().ok
    status = _status(box)
    assert status["step"] == "40-nccl"
    assert status["reason"].startswith(
        f"refusing to download {NCCL_TESTS_URL}: infra/gb300/data/checksums.yaml pins no sha256 for it."
    )
    assert not [c for c in _mutations(box.calls(), "curl") if NCCL_TESTS_URL in c]
    assert not box.path("/var/lib/gb300/downloads/nccl-tests").exists()


def test_a_pinned_plugin_is_built_and_installed_at_its_detect_path(tmp_path: Path) -> None:
    """Once the sharp plugin has a version and sha256, the node builds it with autogen/configure/make install."""
    machine, sha = _served_nccl_tests(tmp_path)
    tarball = tmp_path / "plugin.tar.gz"
    plugin_sha = _tarball(
        tarball, "nccl-rdma-sharp-plugins-2.7.1", {"autogen.sh": "#!/bin/sh\n", "configure": _PLUGIN_CONFIGURE}
    )
    machine.downloads[PLUGIN_URL] = str(tarball)
    box = _plain_node(
        tmp_path,
        {NCCL_TESTS_URL: sha, PLUGIN_URL: plugin_sha},
        machine,
        edit={"nccl-rdma-sharp-plugins": {"version": "2.7.1"}},
    )
    result = box.run()
    assert result.ok, result.output
    assert box.path("/usr/local/nccl-rdma-sharp-plugins/lib/libnccl-net.so").is_file()
    assert "nccl-rdma-sharp-plugins present, pin 2.7.1 not readable" in box.read("/var/lib/gb300/steps/40-nccl.done")
    assert any(c.endswith(" install") for c in _mutations(box.calls(), "make"))


def test_profile_puts_the_plugin_on_the_library_path_only_when_it_exists(tmp_path: Path) -> None:
    """The NCCL profile script adds a library directory to LD_LIBRARY_PATH only if the directory exists."""
    present, missing = tmp_path / "plugin" / "lib", tmp_path / "absent" / "lib"
    present.mkdir(parents=True)
    ctx = BootstrapContext.for_pool(role="gpu-node", cluster_name=REFERENCE_CLUSTER, pool_name="gpu-a")
    ctx = replace(ctx, nccl=replace(ctx.nccl, ld_library_path=(str(missing), str(present))))
    config = yaml.safe_load(render_custom_data(ctx).cloud_config)
    profile = next(e["content"] for e in config["write_files"] if e["path"] == "/etc/profile.d/gb300-nccl.sh")
    script = tmp_path / "gb300-nccl.sh"
    script.write_text(profile)
    shown = subprocess.run(
        ["sh", "-c", f'. "{script}"; printf %s "$LD_LIBRARY_PATH"'],
        env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": "/opt/lib"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown == f"{present}:/opt/lib"
