"""Tests of :mod:`gb300.plan`: the offline plan, the engine's contract and day-2 safety from a state export."""
