"""Node detection tests choose which managers detection sees, and a host root
(:mod:`manager_fixtures`)."""

from manager_fixtures import generic, sandbox, use_managers

__all__ = ["generic", "sandbox", "use_managers"]
