"""Tests of the package root (the command line) and of the repository as a whole (docs, CI definitions)."""
