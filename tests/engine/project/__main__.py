"""The engine test project's program: the payload upload exactly as gb300's NodePayloads component declares it.

tests/engine/test_pulumi_up.py puts this file in place of ``infra/__main__.py`` in a scratch copy of the checkout
(so the engine runs it from ``<copy>/infra``, the directory it gives gb300's own program) and names, in the
stack config ``gb300-engine-test:upload``, a JSON file holding the ``command:local:Command`` inputs that
``gb300 plan`` recorded for that copy's dev stack. Everything else gb300 declares (the account, the container, the
role assignments) needs Azure and is left out; Azurite stands in for the account.
"""

import json
import re
from pathlib import Path

import pulumi
from pulumi_command import local


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


inputs = json.loads(Path(pulumi.Config("gb300-engine-test").require("upload")).read_text(encoding="utf-8"))
# Every input the component gives the command (create, dir, environment, triggers, ...), none left out: an input
# this file does not know fails the run loudly instead of being dropped.
upload = local.Command("payload-publish", **{_snake(k): v for k, v in inputs.items()})
pulumi.export("stdout", upload.stdout)
pulumi.export("stderr", upload.stderr)
