"""Network policy every deployable that connects where a tenant says shares: the SSRF address guard (``ssrf``)."""
