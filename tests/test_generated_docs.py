"""The generated reference pages (docs/configuration.md, docs/cli.md) say what the code says."""

from __future__ import annotations

from pathlib import Path

import pytest

from gb300 import cli, config, paths
from gb300.commands import docs


@pytest.mark.parametrize("page", sorted(docs.pages(cli.build_parser())), ids=str)
def test_generated_page_is_current(page: Path) -> None:
    """A committed generated page equals what `gb300 docs` writes now; the failure names the command to run."""
    committed = paths.REPO_ROOT / page
    assert committed.exists(), f"{page} is missing; run {docs.REGENERATE}"
    text = docs.pages(cli.build_parser())[page]
    assert committed.read_text(encoding="utf-8") == text, f"{page} is out of date; run {docs.REGENERATE}"


def test_check_reports_a_stale_page(tmp_path: Path) -> None:
    """`gb300 docs --check` finds a page that differs from the code, and one that is missing."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "configuration.md").write_text("# hand-edited\n", encoding="utf-8")
    assert docs.stale_pages(cli.build_parser(), tmp_path) == [
        Path("docs/configuration.md"),
        Path("docs/cli.md"),
        Path("docs/node-steps.md"),
    ]


def test_check_passes_on_the_checkout(capsys: pytest.CaptureFixture[str]) -> None:
    """`gb300 docs --check` exits 0 on a checkout whose pages are current, and writes nothing."""
    assert cli.main(["docs", "--check"]) == 0
    assert capsys.readouterr().err == ""


def test_configuration_page_follows_the_models() -> None:
    """The configuration reference lists each key's default and constraints as the models define them."""
    page = docs.configuration_page()
    rack_row = next(line for line in page.splitlines() if line.startswith("| `gb300:gpuPools[].racks` |"))
    racks = config.GpuPool.model_fields["racks"]
    assert "integer, at least 1" in rack_row  # the upper bound is the fabric's, per size (data/skus.yaml)
    assert "`maxRacksPerFabric`" in rack_row
    assert racks.description is not None
    assert " ".join(racks.description.split()) in rack_row
    username = next(line for line in page.splitlines() if line.startswith("| `gb300:access.adminUsername` |"))
    assert f"`{config.AccessSettings.model_fields['admin_username'].default}`" in username


def test_cli_page_lists_every_command_and_option() -> None:
    """Each subcommand has a section, and each of its options a row, taken from the parser itself."""
    parser = cli.build_parser()
    page = docs.cli_page(parser)
    for name, _summary, sub in docs._parsers(parser, "gb300"):
        assert f"## `{name}`" in page
        for action in sub._actions:
            for option in action.option_strings:
                if option not in {"-h", "--help"}:
                    assert f"`{option}" in page.split(f"## `{name}`", 1)[1], f"{name}: {option} undocumented"
