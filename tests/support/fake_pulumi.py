"""A stand-in ``pulumi`` CLI for running the scripts gb300 writes (``gb300 migrate-racks``'s commands.sh).

:func:`install` puts an executable ``pulumi`` in a directory (for ``PATH``). Each call is checked against
tests/fixtures/pulumi-cli.yaml (the command, each flag, the number of arguments; the same check the CI files
get) and appended to ``calls.jsonl``; an unknown command or flag exits 2 as cobra does. Answers:

* ``pulumi version``: the ``version`` given to :func:`install` (default ``v3.272.0``);
* ``pulumi preview --json``: the document in ``preview.json`` beside the log (a test writes the steps it wants);
* ``pulumi stack export --file F``: writes ``state.json`` beside the log to F;
* anything else that passes the check: exit 0, nothing printed.

What it cannot show: what the real engine does with an import file (the Read, the merge of inputs) and what a
real preview of imported racks holds. Tests give it the preview shapes pulumi/pulumi ``pkg/display/json.go``
defines; the ops come from ``pkg/resource/deploy/step.go``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

_SCRIPT = """#!{python}
import sys
sys.path.insert(0, {root!r})
from tests.support.fake_pulumi import main
sys.exit(main(sys.argv, {home!r}))
"""


def install(bin_dir: Path, home: Path, *, preview: dict[str, Any] | None = None, version: str | None = None) -> Path:
    """Write ``bin_dir/pulumi`` answering from ``home`` (its log, preview and state files); return ``bin_dir``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    root = str(Path(__file__).resolve().parents[2])
    exe = bin_dir / "pulumi"
    exe.write_text(_SCRIPT.format(python=sys.executable, root=root, home=str(home)), encoding="utf-8")
    exe.chmod(0o755)
    (home / "preview.json").write_text(json.dumps(preview or {"steps": []}), encoding="utf-8")
    (home / "state.json").write_text(json.dumps({"version": 3, "deployment": {"resources": []}}), encoding="utf-8")
    if version is not None:
        (home / "version").write_text(version, encoding="utf-8")
    return bin_dir


def calls(home: Path) -> list[list[str]]:
    """Every call so far, as its argument list (without ``pulumi``)."""
    log = home / "calls.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def main(argv: list[str], home_dir: str) -> int:
    from tests.support.ci_files import PULUMI_CLI, load, parse_pulumi  # noqa: PLC0415 - the repo is on the path now

    home = Path(home_dir)
    with (home / "calls.jsonl").open("a", encoding="utf-8") as log:
        log.write(json.dumps(argv[1:]) + "\n")
    call = parse_pulumi(tuple(argv), load(PULUMI_CLI))
    if call.problems:
        print(f"error: {'; '.join(call.problems)}", file=sys.stderr)
        return 2
    if call.command == "version":
        version = home / "version"
        print(version.read_text(encoding="utf-8").strip() if version.exists() else "v3.272.0")
    elif call.command == "preview" and "--json" in call.flags:
        print((home / "preview.json").read_text(encoding="utf-8"))
    elif call.command == "stack export" and call.flags.get("--file"):
        Path(str(call.flags["--file"])).write_text((home / "state.json").read_text(encoding="utf-8"), encoding="utf-8")
    return 0
