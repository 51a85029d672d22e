"""accelkit's built-in vendor plugins, one module per family.

Each is written exactly as a third-party plugin would be: it imports only ``accelkit``, declares
an ``AcceleratorManager`` and registers it with ``@accelkit.hookimpl``.
"""
