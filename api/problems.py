"""Errors as RFC 9457 problem+json: the same :class:`Problem` and handlers the connector worker answers with."""

from __future__ import annotations

from connectors.runtime.problems import MEDIA_TYPE, Problem, install_problem_handlers, problem_response

__all__ = ["MEDIA_TYPE", "Problem", "install_problem_handlers", "problem_response"]
