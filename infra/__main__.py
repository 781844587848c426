"""Pulumi entry point (Pulumi.yaml `main: infra/`). All logic lives in the gb300 package beside this file."""

from gb300.program import main

main()
