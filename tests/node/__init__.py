"""Tests of :mod:`gb300.node`: the node registry, node files and custom data, and nodes end to end."""
