"""The service-quota custom resource: requests quota increases up to the configured targets (its own
bundle)."""
