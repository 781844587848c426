"""``--cpu-durations=N``: the N tests that took the most CPU time, set-up and tear-down included.

``--durations`` reports wall time, which on a shared machine measures the other load as much as the test. CPU time
(this process's and its reaped children's, user and system) is what a test costs wherever it runs. Under
pytest-xdist each worker measures its own tests and the numbers travel in the report's ``user_properties``.
"""

from __future__ import annotations

import resource
from collections.abc import Generator

import pytest

KEY = "cpu_s"


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-durations", type=int, default=None, metavar="N", help="show the N most CPU-costly tests")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    item.stash[_START] = _cpu()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    outcome = yield
    if call.when == "teardown" and _START in item.stash:
        outcome.get_result().user_properties.append((KEY, _cpu() - item.stash[_START]))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    count = config.getoption("--cpu-durations")
    if count is None:
        return
    costs: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            for key, value in getattr(report, "user_properties", ()):
                if key == KEY:
                    costs[report.nodeid] = value
    total = sum(costs.values())
    terminalreporter.write_sep("=", f"CPU time: {total:.1f} s over {len(costs)} tests, the {count} costliest")
    for nodeid, cost in sorted(costs.items(), key=lambda kv: -kv[1])[: count or None]:
        terminalreporter.write_line(f"{cost:8.2f}s  {nodeid}")


_START = pytest.StashKey[float]()
