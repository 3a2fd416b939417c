"""A resolver for the SSRF guard that answers from a script (to stage DNS rebinding) and records every lookup."""

from __future__ import annotations


class ScriptedResolver:
    """Answers from a script per host (the last answer repeats) and records every lookup. Keyword names stand for
    host names with ``_`` for ``.``: ``ScriptedResolver(slack_test=["93.184.216.34", "10.0.0.7"])``."""

    def __init__(self, **answers: list[str]) -> None:
        self.answers = {host.replace("_", "."): list(seq) for host, seq in answers.items()}
        self.lookups: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        seq = self.answers[host]
        return [seq.pop(0) if len(seq) > 1 else seq[0]]
