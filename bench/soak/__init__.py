"""The soak benchmark (``bench/soak.py``): an hour of steady mixed load on the whole local platform, a fault every
few minutes, then what was lost or doubled, how fast freshness came back, and whether memory stayed flat.

One job per module: ``tenants`` (the 50 tenants and what each needs), ``receiver`` (the signed-webhook receiver),
``catalog`` (the events each tenant sends), ``load`` (the paced sender), ``faults`` (the faults and the restarts),
``rss`` (memory of every process), ``prom`` (Prometheus' curves), ``verify`` (per event id, at the end), ``report``
and ``plot`` (the summary and the figure), ``run`` (the whole run, in order).
"""
