"""A small evaluator for the part of KQL that gb300's log alert uses, to run its filter on real log lines.

It evaluates a query's ``where`` predicates and ``extend Column = extract(regex, group, Column)`` on one row (a
dict of column values), with Kusto's semantics for the operators it knows: ``==`` and ``!=`` compare strings
case-sensitively, ``startswith`` ignores case (``startswith_cs`` does not), ``and`` binds tighter
than ``or``, parentheses group. Anything else (another operator, function or tabular operator than the table
name, ``where``, ``extend``, ``project``) raises ``ValueError``, so a query that grows beyond this subset fails
its test instead of being half-understood. Kusto's reference: learn.microsoft.com/kusto/query/ (string
operators, extract()).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<op>==|!=|\(|\)|,|=)|(?P<word>[A-Za-z_][A-Za-z0-9_]*|\d+))')
_OPERATORS = {"==", "!=", "startswith", "startswith_cs"}
_PIPE = re.compile(r'\|(?=(?:[^"]*"[^"]*")*[^"]*$)')  # a | outside string literals


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text.rstrip()):
        match = _TOKEN.match(text, pos)
        if not match:
            raise ValueError(f"KQL subset: cannot read {text[pos:]!r}")
        out.append(match.group(match.lastgroup or "word"))
        pos = match.end()
    return out


def _string(token: str) -> str:
    if not (token.startswith('"') and token.endswith('"')):
        raise ValueError(f"KQL subset: expected a string literal (got {token!r})")
    return re.sub(r"\\(.)", r"\1", token[1:-1])


class _Predicate:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.pos = 0

    def _next(self) -> str:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def _peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def evaluate(self, row: dict[str, str]) -> bool:
        self.pos = 0
        result = self._or(row)
        if self._peek() is not None:
            raise ValueError(f"KQL subset: unexpected {self._peek()!r}")
        return result

    def _or(self, row: dict[str, str]) -> bool:
        value = self._and(row)
        while self._peek() == "or":
            self._next()
            value = self._and(row) or value
        return value

    def _and(self, row: dict[str, str]) -> bool:
        value = self._term(row)
        while self._peek() == "and":
            self._next()
            value = self._term(row) and value
        return value

    def _term(self, row: dict[str, str]) -> bool:
        if self._peek() == "(":
            self._next()
            value = self._or(row)
            if self._next() != ")":
                raise ValueError("KQL subset: unbalanced parentheses")
            return value
        column, op, literal = self._next(), self._next(), _string(self._next())
        if column not in row:
            raise ValueError(f"KQL subset: no column {column!r} in the row")
        value = row[column]
        if op not in _OPERATORS:
            raise ValueError(f"KQL subset: operator {op!r} is not supported")
        if op == "==":
            return value == literal
        if op == "!=":
            return value != literal
        if op == "startswith":
            return value.lower().startswith(literal.lower())
        return value.startswith(literal)  # startswith_cs


def _stages(query: str) -> Iterator[tuple[str, list[str]]]:
    parts = [p.strip() for p in _PIPE.split(query)]
    yield "table", _tokens(parts[0])
    for part in parts[1:]:
        tokens = _tokens(part)
        yield tokens[0], tokens[1:]


def table(query: str) -> str:
    """The table a query reads (its first stage)."""
    [name] = next(_stages(query))[1]
    return name


def run(query: str, row: dict[str, str]) -> dict[str, str] | None:
    """The row after the query's stages, or None when a ``where`` drops it."""
    row = dict(row)
    for kind, tokens in _stages(query):
        if kind == "table":
            continue
        if kind == "where":
            if not _Predicate(tokens).evaluate(row):
                return None
        elif kind == "extend":
            name, eq, func, *args = tokens
            if eq != "=" or func != "extract" or args[0] != "(" or args[-1] != ")":
                raise ValueError(f"KQL subset: only `extend X = extract(...)` is supported (got {tokens})")
            regex, group, source = _string(args[1]), int(args[3]), args[5]
            match = re.search(regex, row[source])
            row[name] = match.group(group) if match else ""
        elif kind == "project":
            columns = [t for t in tokens if t != ","]
            row = {c: row.get(c, "") for c in columns}
        else:
            raise ValueError(f"KQL subset: tabular operator {kind!r} is not supported")
    return row
