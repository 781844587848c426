"""Tests of :mod:`gb300.config`: the stack configuration contract, its messages and the subnet plan."""
