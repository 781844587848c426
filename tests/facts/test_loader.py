"""One typed facts layer: one loader reads every data file, one type per fact kind, every pin in versions.yaml."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import gb300
from gb300.errors import DataError
from gb300.facts import loader, sizing, software
from gb300.paths import DATA_DIR, PACKAGE_DIR, POLICIES_DIR

LOADER = PACKAGE_DIR / "facts" / "loader.py"
STACK_FILES = PACKAGE_DIR / "io" / "reader.py"  # files from elsewhere: the strict reader (gb300.io), not facts
PARSING = re.compile(r"\byaml\.(safe_load|load|full_load|unsafe_load|compose|safe_load_all|load_all)\b|CSafeLoader")
OPENING_DATA = re.compile(r"DATA_DIR\s*/\s*[\"'][^\"']+[\"']\s*\)?\s*\.(open|read_text|read_bytes)\(")


def _python_files() -> list[Path]:
    return [p for root in (PACKAGE_DIR, POLICIES_DIR) for p in sorted(root.rglob("*.py"))]


def test_yaml_is_parsed_by_the_loader_alone() -> None:
    """No module but the facts loader (and the stack file reader) parses YAML or opens a data file itself."""
    offenders = []
    for path in _python_files():
        if path in (LOADER, STACK_FILES):
            continue
        text = path.read_text(encoding="utf-8")
        if PARSING.search(text) or OPENING_DATA.search(text):
            offenders.append(str(path.relative_to(PACKAGE_DIR.parent)))
    assert offenders == []
    assert PARSING.search(LOADER.read_text(encoding="utf-8"))  # the check looks for what the loader does


def test_the_loader_reads_the_folder_gb300_paths_names() -> None:
    """The loader names its data folder itself (it is below gb300.paths); both name infra/gb300/data."""
    assert loader.DATA_DIR == DATA_DIR == PACKAGE_DIR / "data"
    assert (loader.DATA_DIR / "skus.yaml").is_file()


def test_data_files_are_read_once_and_handed_out_as_copies() -> None:
    """A data file is parsed once per process, and a caller changing its copy changes nobody else's."""
    loader._data.cache_clear()
    first = loader.data("skus.yaml")
    first["skus"].clear()
    second = loader.data("skus.yaml")
    assert second["skus"]
    assert loader._data.cache_info().misses == 1
    assert loader._data.cache_info().hits >= 1


def test_a_malformed_data_file_names_itself(tmp_path: Path) -> None:
    """A file that is not YAML, or not a mapping, raises DataError naming the file (a bug in gb300, exit 3)."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("skus: [unclosed\n", encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(str(broken))):
        loader.read_mapping(broken)
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n", encoding="utf-8")
    with pytest.raises(DataError, match="must hold a mapping at the top level"):
        loader.read_mapping(listed)


def test_each_lustre_sku_fact_has_one_type() -> None:
    """lustre.yaml becomes one LustreSku type, read by the sizing, the storage rules and size-storage alike."""
    defined = []
    for info in pkgutil.walk_packages(gb300.__path__, prefix="gb300."):
        module = importlib.import_module(info.name)
        defined += [
            f"{info.name}.{name}"
            for name, obj in inspect.getmembers(module, inspect.isclass)
            if name == "LustreSku" and obj.__module__ == info.name
        ]
    assert defined == ["gb300.facts.sizing.LustreSku"]
    sku = sizing.lustre_skus()["AMLFS-Durable-Premium-40"]
    assert (sku.max_tib.value, sku.max_alternative, sku.max_tib.status) == (768, 1536, "conflict")


def test_every_software_pin_is_in_versions_yaml() -> None:
    """The storage and monitoring pins live in versions.yaml with a source and a status; the other files hold none."""
    pins = loader.data("versions.yaml")["pins"]
    assert set(pins) == {
        "lustreClientPackages",
        "blobfuse2Package",
        "dcgmExporterImage",
        "nodeExporterPackage",
        "prometheusPackage",
    }
    for name, entry in pins.items():
        assert entry["status"] in {"verified", "unverified", "conflict"}, name
        assert entry["source"].strip(), name
        assert software.pin(name) == entry["value"]
    for other in ("monitoring.yaml", "storage.yaml"):
        text = (DATA_DIR / other).read_text(encoding="utf-8")
        assert not re.search(r"^\s*(exporters|packages|package|\w+Package|\w+Image):", text, re.MULTILINE), other
