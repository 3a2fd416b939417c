"""What an operator watches metalake with: the metrics' names (the contract every process exposes), the Grafana
dashboard generated from them; the alert rules live in deploy/prometheus/rules/."""
