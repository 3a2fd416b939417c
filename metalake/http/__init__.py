"""HTTP pieces of metalake's services: ``problems`` (problem+json), ``bodies`` and ``json_body`` (body limits, one
JSON parse), ``ratelimit`` (token buckets), ``metrics`` (``/metrics`` on the FastAPI apps) need ``fastapi`` or serve
the two FastAPI apps (the ``api`` and ``connectors`` extras install it; the rest of the kernel does not import them);
``health`` needs no fastapi (the processors' health servers)."""
