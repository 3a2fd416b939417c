"""Jira: one issue per tagged asset through the ``jira`` package on a pinned ``requests`` session, ADF texts."""
