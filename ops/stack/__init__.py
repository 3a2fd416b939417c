"""The local stack: fetch, configure, start, health-check and stop real services on loopback, without Docker."""

from ops.stack.manager import StackError, StackManager

__all__ = ["StackError", "StackManager"]
