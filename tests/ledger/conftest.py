"""The ledger and `accelkit run` tests share the pool tests' fixtures: example nodes, a ledger file
each, and a clean environment (:mod:`ledger_fixtures`)."""

from ledger_fixtures import builtins_only, h100, ledger, ledger_path, node_files

__all__ = ["builtins_only", "h100", "ledger", "ledger_path", "node_files"]
