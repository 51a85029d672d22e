"""Engines that run accelkit's grants: ``accelkit.integrations.dask`` (extra ``accelkit[dask]``)
and ``accelkit.integrations.ray`` (extra ``accelkit[ray]``). Each imports its engine, so import
the one you use; nothing here is imported by ``import accelkit``."""
