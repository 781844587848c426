"""Tests of :mod:`gb300.bootstrap`: rendered custom data and the node scripts in the sandbox."""
