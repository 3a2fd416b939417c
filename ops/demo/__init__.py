"""The demo: the whole flow end to end through the admin API, printing what happened (``metalake demo``)."""
