"""HTTP pieces every FastAPI service of metalake shares. Needs ``fastapi``, which the ``api`` and ``connectors``
extras both install; nothing else in the kernel imports this package."""
