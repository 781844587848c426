"""Tests of :mod:`gb300.facts`: the catalog, images, roles and Lustre sizing facts."""
