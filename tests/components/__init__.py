"""Tests of :mod:`gb300.components`: each component's resources as the provider receives them."""
