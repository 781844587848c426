"""Tests of :mod:`gb300.azure` and :mod:`gb300.compute_resource`: contract, quota, Lustre, dynamic resources."""
