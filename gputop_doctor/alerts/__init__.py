"""Alerts: tell a person or a script when a finding starts or clears, off the sampler thread."""
