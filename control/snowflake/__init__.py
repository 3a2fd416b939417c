"""Snowflake masking in the control plane, a pure function of a tenant's PII-tagged columns: the script
(``masking``), its column blocks (``blocks``), exact SQL pieces (``sql``), the columns read from the projection
(``inventory``) and the script of one tenant from the settings (``policies``), which the admin API and the CLI serve."""
