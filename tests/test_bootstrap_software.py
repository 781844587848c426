"""Pinned software: versions.yaml defaults, `gb300:software` overrides, NCCL environment data."""

from __future__ import annotations

import pytest

from gb300.bootstrap import (
    SoftwareOverrideError,
    apply_software_overrides,
    check_software_overrides,
    load_nccl,
    load_software,
)

DOMAIN_SECTION_4 = {
    "nvidia-driver": "580.126.20",
    "nvidia-imex": "580.126.20",
    "doca-ofed": "3.2.2",
    "cuda": "13.0",
    "nccl": "2.29.7",
    "dcgm": "4.5.3",
}


def test_defaults_are_what_the_azure_gb_image_carries() -> None:
    """With no overrides, the pinned versions are the Azure GB image's (DOMAIN.md section 4)."""
    versions = load_software().as_versions()
    for name, version in DOMAIN_SECTION_4.items():
        assert versions[name] == version


def test_every_component_says_where_its_version_comes_from() -> None:
    """Each component and repository carries a status and a source note."""
    software = load_software()
    for item in (*software.components, *software.repos):
        assert item.status in {"verified", "unverified", "conflict"}, item.name
        assert item.source, item.name


def test_downloaded_files_carry_a_checksum_or_are_marked_unverified() -> None:
    """A downloaded file has a sha256, or its entry is marked unverified (and the node refuses it)."""
    software = load_software()
    for comp in software.components:
        for file in comp.files:
            assert file.sha256 or comp.status == "unverified", file.url
    for repo in software.repos:
        assert repo.key_sha256 or repo.status == "unverified", repo.name


def test_override_changes_version_and_derived_package_names() -> None:
    """Overriding CUDA to 13.1 pins cuda-toolkit-13-1 at 13.1.* and leaves others at their defaults."""
    software = apply_software_overrides({"cuda": "13.1"})
    cuda = software.component("cuda")
    assert cuda.version == "13.1"
    assert cuda.packages == ("cuda-toolkit-13-1",)
    assert cuda.apt_version == "13.1.*"
    assert cuda.overridden
    assert software.component("nccl").version == "2.29.7"


def test_override_of_doca_moves_its_repository() -> None:
    """Overriding DOCA-OFED points the DOCA apt repository at that release."""
    software = apply_software_overrides({"doca-ofed": "3.3.0"})
    doca = next(r for r in software.repos if r.name == "doca")
    assert "/doca/3.3.0/ubuntu24.04/arm64-sbsa" in doca.url


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"ncl": "2.29.7"},
            r"gb300:software\.ncl: unknown component \(got 'ncl'\)\. Known components: nvidia-driver",
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
