"""Slurm hostlist compression and expansion (gb300.slurm.hostlist)."""

from __future__ import annotations

import pytest

from gb300.slurm.hostlist import compress, expand


@pytest.mark.parametrize(
    ("hosts", "expected"),
    [
        ([f"gpu-r01-{i:03d}" for i in range(1, 19)], "gpu-r01-[001-018]"),
        (["gpu-r01-001"], "gpu-r01-001"),
        (["gpu-003", "gpu-001", "gpu-002", "gpu-007", "gpu-009", "gpu-008"], "gpu-[001-003,007-009]"),
        (["gpu-001", "gpu-001", "gpu-002"], "gpu-[001-002]"),
        (["gpu-9", "gpu-10", "gpu-11"], "gpu-[9-11]"),
        (["gpu-09", "gpu-10", "gpu-100"], "gpu-[09-10,100]"),
        (["gpu-009", "gpu-9"], "gpu-[9,009]"),
        ([f"gpu-r02-{i:03d}" for i in range(1, 4)] + [f"gpu-r01-{i:03d}" for i in range(1, 4)],
         "gpu-r01-[001-003],gpu-r02-[001-003]"),
        (["head", "gpu-1", "login"], "gpu-1,head,login"),
        (["node1", "node3", "node5"], "node[1,3,5]"),
        ([], ""),
    ],
    ids=[
        "full-rack", "single", "unordered-runs", "duplicates", "unpadded-width-change", "padded-then-wider",
        "same-number-two-widths", "two-prefixes", "literals", "gaps", "empty",
    ],
)  # fmt: skip
def test_compress(hosts: list[str], expected: str) -> None:
    """Host names compress to the shortest deterministic Slurm hostlist, padding kept exactly."""
    assert compress(hosts) == expected


@pytest.mark.parametrize(
    "hosts",
    [
        [f"gpu-r{r:02d}-{i:03d}" for r in range(1, 4) for i in range(1, 19) if (r, i) != (2, 7)],
        ["a1", "a2", "a10", "b", "b01", "b02"],
        [f"ndgb300{i:06d}" for i in range(0, 72, 3)],
    ],
    ids=["three-racks-one-missing", "mixed", "scale-set-names"],
)
def test_expand_inverts_compress(hosts: list[str]) -> None:
    """Expanding a compressed hostlist gives back exactly the same set of names."""
    assert sorted(expand(compress(hosts))) == sorted(set(hosts))


@pytest.mark.parametrize("expression", ["gpu-[001-003", "gpu-[a-b]", "gpu-[1-2][3-4]"])
def test_expand_rejects_what_it_cannot_read(expression: str) -> None:
    """An expression with a broken or nested bracket is refused with a ValueError, not misread."""
    with pytest.raises(ValueError, match="hostlist"):
        expand(expression)
