"""Every relative link and anchor in the Markdown documentation leads somewhere, and no file cites private notes."""

from __future__ import annotations

import importlib
import re
import unicodedata
from pathlib import Path

import pytest

from gb300 import paths

ROOT = paths.REPO_ROOT
SKIP_DIRS = {".git", ".venv", "node_modules", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def markdown_files() -> list[Path]:
    """README.md, docs/**/*.md and every other Markdown file of the checkout."""
    found = []
    for path in ROOT.rglob("*.md"):
        rel = path.relative_to(ROOT)
        if not SKIP_DIRS.intersection(rel.parts):
            found.append(path)
    return sorted(found)


def _prose_lines(text: str) -> list[str]:
    """The lines of a Markdown text outside fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return out


def _heading_text(raw: str) -> str:
    """A heading's rendered text: code spans keep their content, links their text, emphasis markers go."""
    text = re.sub(r"`+([^`]*)`+", r"\1", raw)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"(\*\*|__|\*)", "", text)


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (but ``-`` and ``_``), spaces to hyphens."""
    kept = []
    for char in _heading_text(heading).strip().lower():
        category = unicodedata.category(char)
        if char in "-_ " or category[0] in "LN" or category == "Mn":
            kept.append(char)
    return "".join(kept).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a Markdown file defines: heading slugs (duplicates numbered, as GitHub does) and HTML ids."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in _prose_lines(path.read_text(encoding="utf-8")):
        out.update(HTML_ANCHOR.findall(line))
        match = HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def links(path: Path) -> list[str]:
    """The link targets of a Markdown file, outside code blocks and code spans."""
    out = []
    for line in _prose_lines(path.read_text(encoding="utf-8")):
        prose = INLINE_CODE.sub("", line)
        out.extend(LINK.findall(prose))
        ref = REFERENCE.match(prose)
        if ref:
            out.append(ref.group(1))
    return out


def _is_external(target: str) -> bool:
    return bool(re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE))


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def broken_links(path: Path) -> list[str]:
    """One line per relative link of ``path`` whose file or anchor does not exist."""
    problems = []
    for target in links(path):
        if _is_external(target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            problems.append(f"{target}: no file {_shown(dest)}")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{target}: no heading with anchor #{anchor} in {_shown(dest)}")
    return problems


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(path: Path) -> None:
    """Each relative link names an existing file, and each #anchor a heading of that file (GitHub's slugs)."""
    assert broken_links(path) == []


def test_the_link_check_catches_a_broken_link(tmp_path: Path) -> None:
    """A link to a missing file, or to a heading the file lacks, is reported; code spans and blocks are ignored."""
    page = ROOT / "docs" / "README.md"
    bad = tmp_path / "bad.md"
    bad.write_text(
        f"# Top\n\n[a]({page}#no-such-heading) [b](missing.md) [c](#top) [d](#nowhere) `[e](gone.md)`\n\n"
        "```\n[f](gone-too.md)\n```\n",
        encoding="utf-8",
    )
    problems = [p.split(":")[0] for p in broken_links(bad)]
    assert problems == [f"{page}#no-such-heading", "missing.md", "#nowhere"]


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Job accounting (`gb300:head.slurmdbd`)", "job-accounting-gb300headslurmdbd"),
        ("Pinning downloads: `gb300 software lock`", "pinning-downloads-gb300-software-lock"),
        ("Head VM: no `securityProfile`", "head-vm-no-securityprofile"),
        ("Day 2: changing a deployed cluster", "day-2-changing-a-deployed-cluster"),
        ("`snake_case` and **bold**", "snake_case-and-bold"),
    ],
)
def test_slugs_follow_github(heading: str, slug: str) -> None:
    """Anchors are computed as GitHub computes them from a heading's text."""
    assert github_slug(heading) == slug


REPO_PATH = re.compile(
    r"`((?:infra|tests|cloud-init|templates|policies|scripts|bench|stacks|docs|examples|\.github|\.ci)/[\w./-]*)"
    r"(?:::(\w+))?`"
)
MODULE_REFERENCE = re.compile(r"`(gb300(?:\.[A-Za-z_]+)+)`")
PLACEHOLDER = re.compile(r"(^|/)(NN-|[\w-]*-name\b)")


def _resolves(dotted: str) -> bool:
    """Whether ``gb300.a.b`` names a module, or an attribute of the longest importable module prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(target, name):
                return False
            target = getattr(target, name)
        return True
    return False


def missing_references(text: str) -> list[str]:
    """Repository paths, test ids and ``gb300`` modules named in code spans of ``text`` that do not exist."""
    missing = []
    for rel, function in REPO_PATH.findall(text):
        target = ROOT / rel.rstrip("/")
        if PLACEHOLDER.search(rel):
            continue
        if not target.exists():
            missing.append(rel)
        elif function and not re.search(rf"^\s*(async )?def {function}\(", target.read_text(), re.MULTILINE):
            missing.append(f"{rel}::{function}")
    return missing + [m for m in MODULE_REFERENCE.findall(text) if not _resolves(m)]


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_repository_paths_and_modules_named_in_docs_exist(path: Path) -> None:
    """Each repository path (`infra/gb300/data/skus.yaml`, `tests/x.py::test_y`) and module a page names exists."""
    assert missing_references(path.read_text(encoding="utf-8")) == []


def test_the_path_check_catches_a_moved_file() -> None:
    """A moved file, a renamed test or module is reported; placeholders and existing names are not."""
    text = (
        "`infra/gb300/nowhere.py` `tests/test_doc_links.py::test_gone` `gb300.rules.nowhere` "
        "`tests/test_doc_links.py::test_the_path_check_catches_a_moved_file` `gb300.rules` "
        "`cloud-init/scripts/NN-name.sh` `infra/gb300/data/skus.yaml`"
    )
    assert missing_references(text) == [
        "infra/gb300/nowhere.py",
        "tests/test_doc_links.py::test_gone",
        "gb300.rules.nowhere",
    ]


DOC_ANCHOR = re.compile(r"docs/([\w-]+\.md)#([\w-]+)")


def source_anchor_problems(root: Path) -> list[str]:
    """Each ``docs/<page>.md#<anchor>`` that code, templates or data name (help texts, docstrings, comments) and
    that leads to no heading of that page (``docs/page.md#anchor`` is the docs generator's own example)."""
    problems = []
    for top in ("infra", "templates", "policies"):
        for path in sorted((root / top).rglob("*")):
            if not path.is_file() or SKIP_DIRS.intersection(path.parts) or path.suffix in {".pyc", ".png"}:
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            for page, anchor in DOC_ANCHOR.findall(text):
                if page == "page.md":
                    continue
                dest = root / "docs" / page
                if not dest.exists() or anchor not in anchors(dest):
                    problems.append(f"{_shown(path)}: docs/{page}#{anchor}")
    return problems


def test_anchors_named_in_code_resolve() -> None:
    """A help text or comment that sends a reader to docs/x.md#section finds that section."""
    assert source_anchor_problems(ROOT) == []


def test_the_code_anchor_check_catches_a_moved_section(tmp_path: Path) -> None:
    """A help text naming a section that is not a heading of its page is reported with the file that names it."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "x.md").write_text("# X\n\n## Simulating a scenario\n", encoding="utf-8")
    (tmp_path / "infra").mkdir()
    (tmp_path / "infra" / "cli.py").write_text(
        'HELP = "see docs/x.md#scenarios; docs/x.md#simulating-a-scenario"\n', encoding="utf-8"
    )
    assert source_anchor_problems(tmp_path) == [f"{tmp_path / 'infra' / 'cli.py'}: docs/x.md#scenarios"]
