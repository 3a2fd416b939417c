"""The admin API's routers, one module per resource; each exposes ``router`` and is listed in ``api.app.ROUTERS``."""
