"""Where ``serve`` listens and where ``--hosts`` looks when no port is given: written once."""

from __future__ import annotations

# Not 9400, dcgm-exporter's default, which a GPU node often runs beside us. Prometheus's list of
# exporter ports has no free number left in 9100-9999; 19400 is outside that range, below Linux's
# ephemeral ports (32768 and up), and easy to remember. docs/metrics.md says the same.
DEFAULT_PORT = 19400
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"  # loopback: another address only when typed
