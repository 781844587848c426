"""Tests of :mod:`gb300.rules` and the policy pack that wraps them."""
