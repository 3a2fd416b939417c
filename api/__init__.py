"""The tenant-admin API (FastAPI). It never imports ``connectors`` or ``processors``."""
