"""Freshdesk: one ticket per tagged asset or per Monte Carlo incident through REST API v2, resolved when it ends."""
