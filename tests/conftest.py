"""Plugins for the whole test tree. pytest only honours ``pytest_plugins`` in a top-level
conftest, so pytester (used by tests/kit to run the conformance suite as a plugin author would)
is enabled here; it only adds fixtures."""

pytest_plugins = ["pytester"]
