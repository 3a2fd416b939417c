"""HTTP pieces of metalake's services. ``bodies`` and ``problems`` need ``fastapi`` (the ``api`` and ``connectors``
extras install it; the rest of the kernel does not import them); ``health`` is stdlib only (the processors' probes)."""
