"""A finding is a value: which rule, how bad, on what, and what to do about it."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Level(enum.IntEnum):
    """How bad a finding is, numbered like :mod:`logging` so levels compare."""

    INFO = 20
    WARNING = 30
    ERROR = 40

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Level:
        return cls[text.upper()]


@dataclass(frozen=True, order=True)
class Finding:
    """One result of a rule: ``resource`` is a resource URN or a config key path."""

    rule: str
    level: Level
    resource: str
    message: str

    def as_json(self) -> dict[str, str]:
        return {
            "rule": self.rule,
            "level": self.level.label,
            "resource": self.resource,
            "message": self.message,
        }


@dataclass(frozen=True)
class Report:
    """What a rule's check says about one resource or key path; the rule names it (:meth:`named`) with its id.

    A check never writes its rule's id: :class:`gb300.rules.base.Rule` turns each report into a :class:`Finding`.
    """

    level: Level
    resource: str
    message: str

    def named(self, rule: str) -> Finding:
        return Finding(rule, self.level, self.resource, self.message)
