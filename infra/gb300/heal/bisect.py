"""Finding the slow node of a failed rack NCCL run by bisection (docs/self-healing.md#a-slow-node-stragglers).

Azure's NCCL diagnosis guide (Azure/ai-infrastructure-on-azure ``skills/ai-infra/references/nccl_diagnosis.md``,
"Bisection Algorithm"): one bad node drags a whole rack's collective down; split the failing group into two halves
and run both at once; a half that passes is known good, a half that fails is split again (both failing: a bad node
in each); a group of two or three suspects is tested node by node, each paired with a *different* known-good node,
all pairs at once; the node of a failing pair is the bad one. Then the original run is made again without it.

The bisection is plain data (a JSON mapping, saved with its case in the head's state file): :func:`start` opens
it, :func:`plan` names the runs of the next round, :func:`settle` reads their verdicts; the ladder
(:mod:`gb300.heal.ladder`) submits and collects the runs through its NCCL runner.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

PAIR_AT = 3
"""A failing group of at most this many nodes is tested node by node, each with a known-good node (the guide's 2-3)."""

Bisection = dict[str, Any]
"""``groups`` (failing groups still to split), ``good``, ``bad``, ``unresolved`` (suspects no pair could test),
``passed_whole`` (groups whose halves both passed) and ``runs`` (handle -> the suspects it tests, and whether it is
a pair run)."""


def start(hosts: Sequence[str]) -> Bisection:
    """A bisection of the failed run's ``hosts``."""
    return {"groups": [list(hosts)], "good": [], "bad": [], "unresolved": [], "passed_whole": 0, "runs": {}}


def plan(state: Bisection) -> list[dict[str, Any]]:
    """The next round's runs, each ``{suspects, hosts, pair, parent}``: a group larger than :data:`PAIR_AT` split in
    halves (``parent``: the group's index this round); a smaller one as pairs, each suspect with a different
    known-good node. Suspects no known-good node is left for go to ``unresolved``. Empties ``groups``."""
    runs: list[dict[str, Any]] = []
    spare = list(state["good"])
    for index, group in enumerate(state["groups"]):
        if len(group) > PAIR_AT:
            half = len(group) // 2
            for part in (group[:half], group[half:]):
                runs.append({"suspects": part, "hosts": part, "pair": False, "parent": index})
            continue
        for suspect in group:
            if spare:
                runs.append({"suspects": [suspect], "hosts": [suspect, spare.pop(0)], "pair": True, "parent": index})
            else:
                state["unresolved"].append(suspect)
    state["groups"] = []
    return runs


def settle(state: Bisection, verdicts: Mapping[str, bool]) -> None:
    """Read the verdicts of the round's runs (handle -> passed): passing suspects are known good, a failing half is
    split again, a failing pair's suspect is bad."""
    halves: dict[str, list[bool]] = {}
    for handle, run in state["runs"].items():
        passed = verdicts[handle]
        suspects = [str(h) for h in run["suspects"]]
        if passed:
            state["good"] += suspects
        elif run["pair"]:
            state["bad"] += suspects
        else:
            state["groups"].append(suspects)
        if not run["pair"]:
            halves.setdefault(str(run.get("parent", "")), []).append(passed)
    state["passed_whole"] += sum(1 for results in halves.values() if len(results) == 2 and all(results))
    state["runs"] = {}


def done(state: Bisection) -> bool:
    """Whether every group is settled (nothing left to split or pair, no run under way)."""
    return not state["groups"] and not state["runs"]


def describe(state: Bisection) -> str:
    """The bisection's outcome in words, for the decision record."""
    parts = [f"slow: {', '.join(state['bad']) or 'none'}", f"known good: {len(state['good'])}"]
    if state["unresolved"]:
        parts.append(f"not isolated (no known-good partner left): {', '.join(state['unresolved'])}")
    if state["passed_whole"]:
        parts.append("both halves of a failing group passed (the fault needs the whole group: its fabric)")
    return "; ".join(parts)


__all__ = ["PAIR_AT", "Bisection", "describe", "done", "plan", "settle", "start"]
