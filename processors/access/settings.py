"""The access processor's settings (``metalake access run|sync``)."""

from __future__ import annotations

from tenants.access.settings import AccessRulesSettings


class AccessProcessSettings(AccessRulesSettings):
    """What the access processor reads: the kernel's and ``access`` (the rules file, the resync interval)."""
