"""Monte Carlo incident webhooks -> ``com.montecarlodata.incident.{opened,updated,resolved}.v1`` events.

Modules: ``signature`` (HMAC-SHA512 as Monte Carlo computes it), ``payloads`` (lenient envelope models), ``mapping``
(identifiers -> table URNs), ``incidents`` (status, dedup key, event ids, data), ``config``, ``connector``.
"""

from connectors.montecarlo.config import MonteCarloConfig, WarehouseTarget
from connectors.montecarlo.connector import MonteCarloConnector
from connectors.montecarlo.signature import BodyNotJson

__all__ = ["BodyNotJson", "MonteCarloConfig", "MonteCarloConnector", "WarehouseTarget"]
