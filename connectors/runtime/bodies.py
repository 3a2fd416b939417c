"""The worker's routes read their bodies through the one body limit of both HTTP services (the ``BodyLimit`` layer
of :mod:`metalake.http.bodies`, which the worker app installs): a route's own, tighter limit is enforced by that same
layer while the body is read."""

from __future__ import annotations

from metalake.http.bodies import read_body as read_limited

__all__ = ["read_limited"]
