"""Every ``GPUTOP_DOCTOR_*`` environment variable the product reads: its name and one accessor.

An empty value counts as unset everywhere. Each accessor reads the environment when called
(tests and the probe's host process may change it), and returns the raw text: what a value
means (a path, a number in a range) is checked where it is used. Plain ``os`` only, so the
probe, which runs inside the user's training process, can read through it too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

CONFIG = "GPUTOP_DOCTOR_CONFIG"  # the settings file when --config is not given
DEBUG = "GPUTOP_DOCTOR_DEBUG"  # a traceback instead of a one-line error on a bug
PROBE_DIR = "GPUTOP_DOCTOR_PROBE_DIR"  # where the probe publishes and the monitor looks
PROBE_INTERVAL = "GPUTOP_DOCTOR_PROBE_INTERVAL"  # seconds between the probe's writes
NVML_LIB = "GPUTOP_DOCTOR_NVML_LIB"  # libnvidia-ml.so.1 when not on the loader's path
CPU_VENDOR = "GPUTOP_DOCTOR_CPU_VENDOR"  # overrides the detected CPU vendor (tests, what-ifs)
NODE_ROOT = "GPUTOP_DOCTOR_NODE_ROOT"  # another NUMA node map (tests: a fake two-socket host)
SSH_COMMAND = "GPUTOP_DOCTOR_SSH_COMMAND"  # the ssh client and its options for ssh:// hosts
REMOTE_COMMAND = "GPUTOP_DOCTOR_REMOTE_COMMAND"  # what an ssh:// host runs to stream frames
# The kubelet's pod-resources socket, when not at /var/lib/kubelet/pod-resources/kubelet.sock
POD_RESOURCES = "GPUTOP_DOCTOR_POD_RESOURCES"


def _get(name: str, env: Mapping[str, str] | None = None) -> str | None:
    value = (os.environ if env is None else env).get(name)
    return value or None


def config_file() -> str | None:
    return _get(CONFIG)


def debug() -> bool:
    return _get(DEBUG) is not None


def probe_dir(env: Mapping[str, str] | None = None) -> str | None:
    return _get(PROBE_DIR, env)


def probe_interval() -> str | None:
    return _get(PROBE_INTERVAL)


def nvml_lib() -> str | None:
    return _get(NVML_LIB)


def cpu_vendor() -> str | None:
    return _get(CPU_VENDOR)


def node_root() -> str | None:
    return _get(NODE_ROOT)


def ssh_command() -> str | None:
    return _get(SSH_COMMAND)


def remote_command() -> str | None:
    return _get(REMOTE_COMMAND)


def pod_resources_socket() -> str | None:
    return _get(POD_RESOURCES)
