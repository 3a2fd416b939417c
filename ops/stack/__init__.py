"""The local stack: fetch, configure, start, health-check and stop real services on loopback, without Docker.

``manager`` (``StackManager``) runs them; the package imports nothing itself, so the ``metalake`` command finds a
checkout's stack (``paths``) without loading the settings of every process."""
