"""Slack: threads per (asset, tag) through slack-sdk's ``WebClient`` pinned to a checked address, Block Kit texts."""
