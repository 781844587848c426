"""``data/monitoring.yaml``: the Azure Monitor Agent, the log tables, syslog, Prometheus, Grafana and the bootstrap
alert, each with its source."""

from __future__ import annotations

import functools
from typing import Any

from gb300.facts.loader import data


@functools.cache
def facts() -> dict[str, Any]:
    """The monitoring facts, read once per process."""
    return data("monitoring.yaml")


def value(raw: Any) -> Any:
    """A fact's value: ``raw["value"]`` for a fact written with its source (``{value, source, status}``), else
    ``raw`` itself."""
    return raw["value"] if isinstance(raw, dict) and "value" in raw else raw
