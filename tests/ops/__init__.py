"""Tests of :mod:`gb300.ops`: rollout, fleet status, software lock and the CI summary."""
