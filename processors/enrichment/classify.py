"""Automatic PII classification of columns by rules: name patterns, data types, and per-tenant dictionaries.

Pure. The job turns each match into an ``io.metalake.classification.added.v1`` event with ``source: auto``, the
confidence and the rule that fired; state tables never let such an event overwrite a person's decision.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """``tag`` with ``confidence`` when the column name matches ``name`` (a regex searched in the lower-cased name)
    and, if ``data_types`` is not empty, the column's type (lower-cased, parameters dropped) is one of them."""

    name: str
    tag: str
    pattern: str
    confidence: float
    data_types: frozenset[str] = frozenset()

    def matches(self, column: str, data_type: str | None) -> bool:
        if not re.search(self.pattern, column.lower()):
            return False
        if not self.data_types:
            return True
        base = (data_type or "").lower().split("(")[0].strip()
        return base in self.data_types


_TEXT = frozenset({"text", "varchar", "character varying", "char", "character", "string", "citext"})
_DATES = frozenset({"date", "timestamp", "timestamp without time zone", "timestamp with time zone"})

DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("email-name", "PII", r"(^|_)(e_?mail)(_address)?($|_)", 0.95),
    Rule("phone-name", "PII", r"(^|_)(phone|mobile|msisdn)(_number)?($|_)", 0.9),
    Rule("person-name", "PII", r"(^|_)(first|last|full|given|family|middle)_?name($|_)", 0.85, _TEXT),
    Rule("birth-date", "PII", r"(^|_)(dob|birth_?date|date_of_birth|birthday)($|_)", 0.9),
    Rule(
        "national-id", "PII", r"(^|_)(ssn|social_security(_number)?|national_id|passport(_number)?|tax_id)($|_)", 0.95
    ),
    Rule("postal-address", "PII", r"(^|_)(street|address_line_?\d?|postal_address|home_address)($|_)", 0.8, _TEXT),
    Rule("ip-address", "PII", r"(^|_)(ip|ip_address|client_ip)($|_)", 0.75),
    Rule("payment-card", "PCI", r"(^|_)(card_number|credit_card|cc_number|pan)($|_)", 0.9),
    Rule("birth-date-typed", "PII", r"(^|_)born($|_)", 0.7, _DATES),
)


@dataclass(frozen=True)
class Match:
    tag: str
    confidence: float
    rule: str


def classify(column: str, data_type: str | None, rules: Sequence[Rule], dictionary: Iterable[str] = ()) -> list[Match]:
    """Every tag a column gets (the most confident rule per tag). ``dictionary`` terms are the tenant's own words
    for personal data: a column whose name contains one is tagged PII with rule ``dictionary:<term>``."""
    best: dict[str, Match] = {}
    for rule in rules:
        if rule.matches(column, data_type) and (rule.tag not in best or rule.confidence > best[rule.tag].confidence):
            best[rule.tag] = Match(rule.tag, rule.confidence, rule.name)
    lowered = column.lower()
    for term in dictionary:
        if term and term.lower() in lowered and "PII" not in best:
            best["PII"] = Match("PII", 0.8, f"dictionary:{term.lower()}")
    return sorted(best.values(), key=lambda m: m.tag)
