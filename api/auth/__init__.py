"""OAuth 2 for the admin API: the built-in authorization server, signing keys, API clients, token validation and
the route dependencies (``api.auth.deps``). See docs/api.md."""
