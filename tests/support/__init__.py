"""Test helpers shared by the test packages (not tests): sandboxes, stand-ins, rule tables, paths, goldens."""
