"""Connectors in the control plane: the plugin interface and registry, the connector records (``records``) and their
store (``store``, with its parts ``tasks``, ``secrets`` and ``write_keys``), config validation, task status, the
offsets store and the transform specs. The admin API writes them; the connector worker reads them and runs the plugins
(which live in ``connectors/<name>/`` and are loaded by entry point)."""
