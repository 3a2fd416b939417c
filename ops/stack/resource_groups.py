"""Trino resource groups for tenants' queries: one group per tenant, so one tenant's queries cannot take all of Trino.

Trino's file-based resource group manager (plugin ``resource-group-managers``) reads ``etc/resource-groups.properties``
(relative to Trino's working directory) and the JSON it names, once at start. :func:`build_resource_groups` renders
that JSON: a root group ``tenants`` with a per-tenant group template, ``tenants.${tenant}``, filled from a named group
of the selector's user regex, so all of a tenant's users (:func:`tenants.naming.trino_user`) share one group;
and a root group ``platform`` for every other user (the service users: the job, provisioning, the access runner,
tests). Each group has a hard concurrency limit and a queue limit: past the queue, Trino refuses the query at once
(``QUERY_QUEUE_FULL``). A query's group shows in ``system.runtime.queries.resource_group_id``, e.g.
``['tenants', 'acme']``. See docs/serving.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metalake.tenancy import TENANT_ID_PATTERN
from metalake.trino_settings import TrinoResourceGroupSettings

TENANTS_GROUP = "tenants"
PLATFORM_GROUP = "platform"
# Trino (Java) regex: tenant users are ``tenant.<id>``, ``tenant.<id>.pii``, ``tenant.<id>.admin`` and
# ``tenant.<id>.admin.pii`` (naming.trino_user); the named group becomes the variable of the group template. Ids hold
# no '.', so ``.admin`` or ``.pii`` never belongs to the id.
TENANT_USER_REGEX = r"tenant\.(?<tenant>" + TENANT_ID_PATTERN.pattern + r")(\.admin)?(\.pii)?"
_PLATFORM_MAX_RUNNING = 100
_PLATFORM_MAX_QUEUED = 1000


def build_resource_groups(limits: TrinoResourceGroupSettings) -> dict[str, Any]:
    """The JSON of Trino's file-based resource group manager. Pure."""
    return {
        "rootGroups": [
            {
                "name": TENANTS_GROUP,
                "softMemoryLimit": f"{limits.tenants_memory_percent}%",
                "hardConcurrencyLimit": limits.tenants_max_running,
                "maxQueued": limits.tenants_max_queued,
                "schedulingPolicy": "fair",
                "subGroups": [
                    {
                        "name": "${tenant}",
                        "softMemoryLimit": f"{limits.tenant_memory_percent}%",
                        "hardConcurrencyLimit": limits.tenant_max_running,
                        "maxQueued": limits.tenant_max_queued,
                    }
                ],
            },
            {
                "name": PLATFORM_GROUP,
                "softMemoryLimit": "100%",
                "hardConcurrencyLimit": _PLATFORM_MAX_RUNNING,
                "maxQueued": _PLATFORM_MAX_QUEUED,
            },
        ],
        # First match wins; the last selector takes every other user, else Trino would refuse their queries.
        "selectors": [
            {"user": TENANT_USER_REGEX, "group": f"{TENANTS_GROUP}.${{tenant}}"},
            {"group": PLATFORM_GROUP},
        ],
    }


def resource_groups_properties(config_file: Path) -> str:
    """``etc/resource-groups.properties``: the file manager, reading ``config_file``."""
    return f"resource-groups.configuration-manager=file\nresource-groups.config-file={config_file}\n"
