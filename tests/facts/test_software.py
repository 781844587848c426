"""Pinned software: versions.yaml defaults, `gb300:software` overrides, NCCL environment data."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gb300.errors import BootstrapDataError, SoftwareOverrideError
from gb300.facts.software import (
    VERSIONS_FILE,
    DownloadFile,
    apply_software_overrides,
    check_software_overrides,
    load_checksums,
    load_software,
)
from gb300.node.resources import CLOUD_INIT_DIR
from gb300.node.settings import load_nccl
from gb300.node.steps import compact
from tests.support.bootstrap_helpers import render_role


def test_defaults_are_what_the_azure_gb_image_carries() -> None:
    """With no overrides, every pinned component the default GB image records is the version that image carries
    (its catalog entry, read from azhpc-images' versions.json)."""
    from gb300 import config  # noqa: PLC0415
    from gb300.facts import catalog  # noqa: PLC0415
    from gb300.rules import images  # noqa: PLC0415

    default = config.GpuPool.model_fields["image"].default
    known = catalog.load().image(default)
    assert known is not None
    carried = known.versions[default.rsplit(":", 1)[1]].components
    versions = load_software().as_versions()
    compared = [name for name in known.record_keys if versions.get(name)]
    assert {"nvidia-driver", "doca-ofed", "cuda", "nccl", "dcgm", "nvidia-imex"} <= set(compared)
    for name in compared:
        assert images.carries(carried[name], versions[name]), (name, carried[name], versions[name])


def test_every_component_says_where_its_version_comes_from() -> None:
    """Each component and repository carries a status and a source note."""
    software = load_software()
    for item in (*software.components, *software.repos):
        assert item.status in {"verified", "unverified", "conflict"}, item.name
        assert item.source, item.name


def test_every_pin_in_checksums_yaml_is_used_and_says_where_it_comes_from() -> None:
    """Each checksums.yaml entry names a URL some node downloads (no orphans) and carries a status and source."""
    software = load_software()
    checksums = load_checksums()
    urls = {f.url for c in software.components for f in c.files} | {r.key_url for r in software.repos}
    for pin in (*checksums.files.values(), *checksums.keys.values()):
        assert pin.url in urls, f"checksums.yaml pins {pin.url}, which no component or repository downloads"
        assert pin.status in {"verified", "unverified"}, pin.url
        assert pin.source, pin.url


def test_checksums_reach_the_files_and_keys_they_pin(tmp_path: Path) -> None:
    """A sha256 pinned for a rendered URL reaches that file; a key's fingerprints reach its repository; a commit
    pinned for a repository's tag reaches the component built from it."""
    software = load_software()
    tests, doca = software.component("nccl-tests"), software.component("doca-ofed")
    pyxis = software.component("pyxis").git
    assert pyxis is not None
    cuda_repo = next(r for r in software.repos if r.name == "cuda-sbsa")
    digest = "ab" * 32
    checksums = tmp_path / "checksums.yaml"
    checksums.write_text(
        yaml.safe_dump(
            {
                "files": {tests.files[0].url: {"sha256": digest, "status": "verified", "source": "test"}},
                "keys": {cuda_repo.key_url: {"fingerprints": ["ab12 " * 10], "status": "verified", "source": "t"}},
                "commits": {pyxis.key: {"commit": "c" * 40, "status": "verified", "source": "t"}},
            }
        )
    )
    pinned = load_software(checksums=checksums)
    assert pinned.component("nccl-tests").files[0].sha256 == digest
    assert pinned.component("doca-ofed").files[0].sha256 is None
    assert next(r for r in pinned.repos if r.name == "cuda-sbsa").key_fingerprints == ("AB12" * 10,)
    assert ("file", "doca-ofed", doca.files[0].url) in pinned.unpinned()
    assert ("key", "cuda-sbsa", cuda_repo.key_url) not in pinned.unpinned()
    assert pinned.component("pyxis").git == dataclasses.replace(pyxis, commit="c" * 40)
    assert ("commit", "enroot", "https://github.com/NVIDIA/enroot@v3.5.0") in pinned.unpinned()
    # Overriding the version renders another URL (and tag), which the old pin does not cover.
    moved = apply_software_overrides({"nccl-tests": "2.17.7", "pyxis": "0.22.0"}, checksums=checksums)
    assert moved.component("nccl-tests").files[0].sha256 is None
    assert "2.17.7" in moved.component("nccl-tests").files[0].url
    moved_git = moved.component("pyxis").git
    assert moved_git is not None
    assert (moved_git.ref, moved_git.commit) == ("v0.22.0", None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("files:\n  http://x/a: {sha256: " + "a" * 64 + ", status: verified, source: s}\n", "must be https:// URLs"),
        ("files:\n  https://x/a: {sha256: ABC, status: verified, source: s}\n", "64 lowercase hex digits"),
        ("keys:\n  https://x/k: {fingerprints: [1234], status: verified, source: s}\n", "40 hex digits each"),
        ("keys:\n  https://x/k: {fingerprints: [], status: verified, source: s}\n", "must be a non-empty list"),
        ("files:\n  https://x/a: {sha256: " + "a" * 64 + ", status: verified}\n", "https://x/a.source: must be"),
        ("hashes: {}\n", "unknown section 'hashes'"),
    ],
)
def test_a_bad_checksums_entry_is_named(tmp_path: Path, text: str, message: str) -> None:
    """A malformed checksums.yaml entry fails loading with a message naming the entry."""
    path = tmp_path / "checksums.yaml"
    path.write_text(text)
    with pytest.raises(BootstrapDataError, match=re.escape(message)):
        load_checksums(path)


def test_a_checksum_inline_in_versions_yaml_is_refused(tmp_path: Path) -> None:
    """Checksums have one home: a sha256 written next to a URL in versions.yaml is an error that says where."""
    text = VERSIONS_FILE.read_text().replace(
        '-ubuntu2404_arm64.deb"\n', '-ubuntu2404_arm64.deb"\n        sha256: "' + "a" * 64 + '"\n', 1
    )
    assert text != VERSIONS_FILE.read_text()
    versions = tmp_path / "versions.yaml"
    versions.write_text(text)
    with pytest.raises(BootstrapDataError, match=r"components\.doca-ofed\.files\[0\]\.sha256: checksums live in"):
        load_software(versions)


def test_override_changes_version_and_derived_package_names() -> None:
    """Overriding CUDA to 13.1 pins cuda-toolkit-13-1 at 13.1.* and leaves others at their defaults."""
    software = apply_software_overrides({"cuda": "13.1"})
    cuda = software.component("cuda")
    assert cuda.version == "13.1"
    assert cuda.packages == ("cuda-toolkit-13-1",)
    assert cuda.apt_version == "13.1.*"
    assert cuda.overridden
    assert software.component("nccl").version == load_software().component("nccl").version


def test_override_of_doca_moves_its_file_and_leaves_it_unpinned() -> None:
    """Overriding DOCA-OFED points at that release's doca-host file, which has no sha256 until locked."""
    software = apply_software_overrides({"doca-ofed": "3.3.0"})
    [file] = software.component("doca-ofed").files
    assert file.url.startswith("https://www.mellanox.com/downloads/DOCA/DOCA_v3.3.0/host/doca-host_3.3.0-")
    assert file.sha256 is None
    [default] = load_software().component("doca-ofed").files
    assert default.sha256 == "0343656f130b79b7392742f9f7890fb59d6a1489fa020ccab26adc714e727b04"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"ncl": "2.29.7"},
            r"gb300:software\.ncl: unknown component \(got 'ncl'\)\. Known components: kernel, nvidia-driver",
        ),
        ({"cuda": 13.0}, r"gb300:software\.cuda: must be a version string .*got 13\.0.*Quote it"),
        ({"nccl": "2.29 .7"}, r"gb300:software\.nccl: must be a version string"),
    ],
)
def test_bad_overrides_name_the_config_key(overrides: dict[str, object], message: str) -> None:
    """A bad `gb300:software` entry is rejected with a message naming `gb300:software.<name>`."""
    with pytest.raises(SoftwareOverrideError, match=message):
        apply_software_overrides(overrides)


def test_nccl_environment_is_azures_gb_settings_with_mnnvl_on() -> None:
    """The NCCL/UCX environment is Azure's GB test configuration, MNNVL on, sharp plugin on the path."""
    nccl = load_nccl()
    env = dict(nccl.env)
    assert env["NCCL_MNNVL_ENABLE"] == "1"
    assert env["NCCL_NVLS_ENABLE"] == "1"
    assert env["UCX_NET_DEVICES"] == "mlx5_ib0:1"
    assert env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert dict(nccl.nccl_conf).keys() == {k for k in env if k.startswith("NCCL_")}
    assert "/usr/local/nccl-rdma-sharp-plugins/lib" in nccl.ld_library_path


def test_config_validation_gets_every_problem_with_its_key_path() -> None:
    """Config validation sees all bad `gb300:software` entries at once, each with its key path."""
    problems = check_software_overrides({"nccl": "2.30.1", "ncl": "1", "cuda": 13.0})
    assert [path for path, _ in problems] == ["software.ncl", "software.cuda"]
    assert check_software_overrides({"nccl": "2.30.1"}) == ()


def _versions_with(tmp_path: Path, name: str, fields: dict[str, Any], drop: tuple[str, ...] = ()) -> Path:
    raw = yaml.safe_load(VERSIONS_FILE.read_text())
    entry = raw["components"][name]
    entry.update(fields)
    for key in drop:
        entry.pop(key, None)
    path = tmp_path / "versions.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("name", "fields", "drop", "message"),
    [
        (
            "nccl-tests",
            {"install": "rpm"},
            (),
            r"components\.nccl-tests\.install: must be one of apt, archive, deb, deb-repo, source, none \(got 'rpm'\)",
        ),
        ("nccl-tests", {}, ("files",), r"components\.nccl-tests\.files: a source component must list its source"),
        ("nccl-tests", {"files": []}, (), r"components\.nccl-tests\.files: a source component must list"),
        ("nccl-tests", {}, ("recipe",), r"components\.nccl-tests\.recipe: a source component must name its build"),
        ("nccl-tests", {"recipe": "../x"}, (), r"components\.nccl-tests\.recipe: .*got '\.\./x'"),
        ("nccl", {"recipe": "nccl"}, (), r"components\.nccl\.recipe: only an `install: source` component is built"),
        ("nccl-tests", {"build_env": {"gencode": "x"}}, (), r"components\.nccl-tests\.build_env\.gencode: must be"),
        ("nccl-rdma-sharp-plugins", {"optional": "yes"}, (), r"components\.nccl-rdma-sharp-plugins\.optional: must"),
    ],
)
def test_bad_source_entries_are_rejected_naming_the_field(
    tmp_path: Path, name: str, fields: dict[str, Any], drop: tuple[str, ...], message: str
) -> None:
    """A malformed install kind, source build or optional flag in versions.yaml names the field that is wrong."""
    with pytest.raises(BootstrapDataError, match=message):
        load_software(_versions_with(tmp_path, name, fields, drop))


def test_nccl_tests_is_built_from_the_spack_pinned_tarball_for_sm_103() -> None:
    """nccl-tests 2.17.6 is built from source, checked against Spack's sha256 (unverified), for sm_103 with MPI."""
    comp = load_software().component("nccl-tests")
    assert comp.install == "source"
    assert comp.files == (
        DownloadFile(
            url="https://github.com/NVIDIA/nccl-tests/archive/v2.17.6.tar.gz",
            sha256="38974e70342150ede0e3fb8fd24bfe60ccbde90fa20241716ba8bb338e6b61a0",
        ),
    )
    assert comp.status == "unverified"
    assert "Spack" in comp.source
    assert "not fetched and checked here" in comp.source
    assert dict(comp.build_env)["NVCC_GENCODE"] == "-gencode=arch=compute_103,code=sm_103"
    assert "libopenmpi-dev" in comp.build_packages
    assert not comp.optional


def test_the_unpinned_sharp_plugin_is_optional_with_nothing_to_download() -> None:
    """The sharp plugin has no version, so no tarball URL; it is optional, and only it is."""
    software = load_software()
    plugin = software.component("nccl-rdma-sharp-plugins")
    assert plugin.install == "source"
    assert plugin.version is None
    assert plugin.files == ()
    assert [c.name for c in software.components if c.optional] == ["nccl-rdma-sharp-plugins"]


def test_pinning_the_plugin_version_names_its_release_tarball() -> None:
    """Overriding the plugin's version in the stack gives the tagged release tarball (sha256 still unpinned)."""
    plugin = apply_software_overrides({"nccl-rdma-sharp-plugins": "2.7.1"}).component("nccl-rdma-sharp-plugins")
    assert plugin.files == (
        DownloadFile("https://github.com/Mellanox/nccl-rdma-sharp-plugins/archive/refs/tags/v2.7.1.tar.gz", None),
    )


def test_every_build_recipe_ships_with_the_gpu_node() -> None:
    """Each source component's recipe is a script in cloud-init/build/ placed under /usr/local/lib/gb300/build/."""
    config = yaml.safe_load(render_role("gpu-node").cloud_config)
    placed = {e["path"]: e for e in config["write_files"]}
    for comp in load_software().components:
        if comp.install == "source":
            entry = placed[f"/usr/local/lib/gb300/build/{comp.recipe}.sh"]
            assert entry["permissions"] == "0755"
            # shipped as in the repository, less its header comment block (custom data's size limit)
            assert entry["content"] == compact((CLOUD_INIT_DIR / "build" / f"{comp.recipe}.sh").read_text())
