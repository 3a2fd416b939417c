"""Helpers shared by the tests: fakes and fixtures of the unit tests, the stack, Spark and stand-in servers of the
integration tests. Imported as ``tests._support.<module>``; never imported by the product."""
