"""`gb300 docs --check` holds the docs' claims about gb300 to the code: commands, options, defaults and stack
keys named in README.md and docs/*.md exist as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from gb300 import cli, paths
from gb300.ops.doc_claims import check_docs

FALSE = """\
# A page

Plan it with `gb300 plan --stak dev`, or `gb300 rollout --stack dev --concurency 2`.
Set `gb300:cluster.nmae` and `gb300:gpuPools[0].rakcs`.
`--concurrency N` (default 3) batches the racks.

```console
$ gb300 deploy --stack dev
$ .venv/bin/gb300 payload keygen --output key.pem
```
"""

TRUE = """\
# A page

Plan it with `gb300 plan --stack dev --quiet`; `gb300 heal simulate SCENARIO.yaml` simulates.
Set `gb300:cluster.name`, `gb300:gpuPools[0].racks`, `gb300:gpuPools[i].image`, `gb300:software.slurm`, and the
`gb300:compute:Rack` component is a type token, not a key. `gb300 remediation` in prose is not a command.
`--concurrency N` (default 1) batches the racks.

```console
$ gb300 rollout --stack reference --state state.json \\
    --azure instances --dry-run   # a comment; gb300 creates nothing
```
"""


def _page(tmp_path: Path, text: str) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(text, encoding="utf-8")
    return tmp_path


def test_false_claims_are_each_one_line_naming_the_place(tmp_path: Path) -> None:
    """A misspelt option, an unknown command, an unknown key and a wrong default each give one line at its line."""
    problems = [str(p) for p in check_docs(_page(tmp_path, FALSE), cli.build_parser())]
    assert problems == [
        "docs/page.md:3: `gb300 plan` has no option --stak",
        "docs/page.md:3: `gb300 rollout` has no option --concurency",
        "docs/page.md:4: gb300:cluster.nmae is not a stack config key",
        "docs/page.md:4: gb300:gpuPools[0].rakcs is not a stack config key",
        "docs/page.md:5: --concurrency defaults to 1, not '3'",
        "docs/page.md:8: `gb300` has no command 'deploy' (commands: docs, goodput, heal, init, migrate-racks, payload, "
        "plan, rollout, schema, size-storage, software, status, strip-state, topology, usage)",
        "docs/page.md:9: `gb300 payload keygen` has no option --output",
    ]


def test_true_claims_pass(tmp_path: Path) -> None:
    """Real commands, keys (list indexes, free maps), type tokens, prose and continued lines give nothing."""
    assert check_docs(_page(tmp_path, TRUE), cli.build_parser()) == []


def test_the_shipped_docs_hold_and_docs_check_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """README.md and docs/ make no false claim; `gb300 docs --check` exits 0 and prints nothing."""
    assert check_docs(paths.REPO_ROOT, cli.build_parser()) == []
    assert cli.main(["docs", "--check"]) == 0
    assert capsys.readouterr().err == ""
