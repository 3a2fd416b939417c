"""OpenLineage in: ``POST /api/v1/lineage`` turns run, job and dataset events into assets, columns and lineage."""

from connectors.openlineage.routes import router

__all__ = ["router"]
