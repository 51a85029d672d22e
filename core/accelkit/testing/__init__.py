"""Conformance kit for plugin authors (to be written)."""
