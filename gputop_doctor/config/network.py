"""Where ``serve`` listens and where ``--hosts`` looks when no port is given: written once."""

from __future__ import annotations

DEFAULT_PORT = 9400  # the exporter's port, as with NVIDIA's dcgm-exporter
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"  # loopback: another address only when typed
