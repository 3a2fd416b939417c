"""The admin API's request and response bodies, one module per resource (``common`` for what several share).

Pydantic models only: what a client sends and receives, with the field descriptions and examples the OpenAPI document
shows. The routes (``api.routes``) bind them to HTTP; the services (``api.services``) never see them.
"""
