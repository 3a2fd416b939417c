"""dbt artifacts in: models, sources, seeds and snapshots with their columns, owners, tags and meta, table lineage from
``depends_on`` and column lineage from the compiled SQL. See docs/connectors/dbt.md."""

from connectors.dbt.config import DbtConfig
from connectors.dbt.connector import DbtConnector

__all__ = ["DbtConfig", "DbtConnector"]
