"""Shared fixtures: the fake libnvidia-ml built from C (see tests/fake_nvml/)."""

from tests.fake_nvml.fixtures import (  # noqa: F401
    clock,
    fake_nvml,
    fake_nvml_build,
    fake_nvml_lib,
    fake_nvml_variant,
    open_source,
)
from tests.helpers import spawn  # noqa: F401
