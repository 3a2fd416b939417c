"""PostgreSQL catalog crawler: databases, schemas, tables, views, columns and foreign keys as metalake events."""

from connectors.postgres.config import PostgresCatalogConfig
from connectors.postgres.connector import PostgresCatalogConnector

__all__ = ["PostgresCatalogConfig", "PostgresCatalogConnector"]
