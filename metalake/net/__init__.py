"""Network policy every deployable that connects where a tenant says shares: the SSRF address guard (``ssrf``), HTTP(S)
connections to the checked address (``pinned``) and a delivery's wall-clock deadline (``deadline``)."""
