"""Asset URNs the API takes (query parameters and bodies), validated and made canonical before any lookup or event:
stored rows hold the canonical spelling (``metalake.urn``), so another spelling would find nothing."""

from __future__ import annotations

from pydantic import AfterValidator

from metalake.urn import InvalidUrn, canonical_urn

URN_MAX = 2048


def canonical(value: str) -> str:
    try:
        return canonical_urn(value)
    except InvalidUrn:
        # The parser's reason quotes the value: name the rule instead.
        raise ValueError("not a metalake asset URN (urn:metalake:<platform>:<instance>/<database>[/...])") from None


# Annotated[str, ..., Canonical]: a query parameter or body field holding an asset URN.
Canonical = AfterValidator(canonical)


def canonical_or_none(value: str | None) -> str | None:
    return None if value is None else canonical(value)


# The same, for an optional one.
CanonicalOrNone = AfterValidator(canonical_or_none)
