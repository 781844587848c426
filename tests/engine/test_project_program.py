"""The engine test project's program, run here without a Pulumi CLI through tests/support/language_host.py: it
declares the payload upload with exactly the inputs `gb300 plan` records for the component (what `pulumi up` of
tests/engine/test_pulumi_up.py then runs where a CLI exists)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gb300.plan import PlanResult
from gb300.plan.runner import _record
from tests.engine import test_pulumi_up as engine_test
from tests.support import language_host

COMMAND = "command:local:Command"


@pytest.mark.slow
def test_the_project_declares_the_plans_upload_and_nothing_else(tmp_path: Path, dev_plan: PlanResult) -> None:
    """In the scratch copy, the project's program registers one command whose inputs are the plan's upload's."""
    copy = engine_test._scratch_copy(tmp_path)
    shutil.copy2(Path(engine_test.__file__).with_name("project") / "__main__.py", copy / "infra" / "__main__.py")
    [upload] = [r for r in dev_plan.resources if r.type == COMMAND]
    (tmp_path / "upload.json").write_text(json.dumps(upload.inputs), encoding="utf-8")
    run = language_host.run_program(
        engine_test.STACK, {"gb300-engine-test:upload": str(tmp_path / "upload.json")}, root=copy
    )
    assert run.returncode == 0, run.stderr + "\n".join(run.errors())
    assert run.cwd == copy / "infra"
    [declared] = [_record(r) for r in run.registrations]
    assert declared.type == COMMAND
    assert declared.inputs == upload.inputs
