"""The outbound runtime every destination runs in: the consumer loops (``loops``), matching and short retries
(``dispatch``), the retry topic's schedule (``retry``), the delivery ledger and its expiry (``ledger``,
``retention``), test sends (``testsend``), the subscriptions cache (``subscriptions``), the destination interface and
its registry (``destination``), and the SSRF guard with the pinned HTTP connection every destination connects through
(``pinned_http``, over the kernel's guard :mod:`metalake.net.ssrf`). Nothing here imports a vendor SDK.
"""
