"""OAuth 2 resource-server checks every HTTP service shares: the principal and its scopes, the API clients (records
in ``metalake_control.clients`` the admin API writes), the verification keys (JWKS) and RFC 9068 access-token
validation, and the gate that admits a token (client not revoked, tenant not suspended). The admin API issues the
tokens (``api.auth``); the admin API and the connector worker's ingest API accept them.
"""
