"""Microsoft Teams: one Adaptive Card per change, POSTed to a Workflows (or incoming-webhook) URL."""
