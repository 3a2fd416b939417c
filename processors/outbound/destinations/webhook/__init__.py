"""Signed webhooks (Standard Webhooks style signatures, key rotation) POSTed to a checked address."""
