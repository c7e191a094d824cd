"""GPM (GPU Performance Monitoring) SM, tensor and DRAM activity, Hopper and newer.

Utilization says a kernel was running; GPM says how many SMs were busy, whether the tensor
cores were used and how much of the DRAM bandwidth was, which is what separates "GPU busy"
from "GPU busy doing useful work" (and a memory-bound kernel from a compute-bound one). GPM
metrics are computed from a *pair* of samples taken at least 100 ms apart, so we keep a rolling
pair per GPU and swap the buffers each tick. Everything here is optional: any failure turns GPM
off for that GPU and leaves the rest of the reading alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputop_doctor.sources.nvml.call import NvmlCaller, ReadAborted

MIN_GAP_S = 0.1  # nvml.h: samples closer than this give no meaningful metrics
SM_UTIL = 2  # NVML_GPM_METRIC_SM_UTIL
ANY_TENSOR_UTIL = 5  # NVML_GPM_METRIC_ANY_TENSOR_UTIL
DRAM_BW_UTIL = 10  # NVML_GPM_METRIC_DRAM_BW_UTIL: % of the peak DRAM bandwidth
METRICS = (SM_UTIL, ANY_TENSOR_UTIL, DRAM_BW_UTIL)
Readings = tuple[float | None, float | None, float | None]  # SM, tensor, DRAM bandwidth (%)
NONE: Readings = (None, None, None)


class GpmReader:
    """Rolling-pair GPM reader for one GPU; ``read()`` gives (SM active %, tensor active %,
    DRAM bandwidth used %), each None where the GPU or driver does not give it."""

    def __init__(
        self,
        nvml: Any,
        caller: NvmlCaller,
        index: int,
        handle: Any,
        clock: Callable[[], float],
    ) -> None:
        self._nvml = nvml
        self._caller = caller
        self._index = index
        self._handle = handle
        self._clock = clock
        self._supported: bool | None = None
        self._samples: list[Any] = []
        self._request: Any = None
        self._prev_at: float | None = None
        self._last: Readings = NONE

    def read(self) -> Readings:
        if self._supported is None:
            self._supported = self._start()
        if not self._supported:
            return NONE
        try:
            return self._read()
        except ReadAborted:  # lost, failing, or NVML gone: the device reader decides
            raise
        except Exception as err:  # GPM is optional; it must never break a reading
            self._caller.log_once("GPM", err)
            self.close()
            return NONE

    def close(self) -> None:
        """Free the driver-side sample buffers; GPM stays off afterwards."""
        self._supported = False
        samples, self._samples = self._samples, []
        for sample in samples:
            self._caller.call(
                self._index, "nvmlGpmSampleFree", self._nvml.nvmlGpmSampleFree, sample
            )

    def _start(self) -> bool:
        nvml = self._nvml
        support = self._call("nvmlGpmQueryDeviceSupport", nvml.nvmlGpmQueryDeviceSupport)
        if support is None or not support.isSupportedDevice:
            return False
        for _ in range(2):
            sample = self._caller.call(self._index, "nvmlGpmSampleAlloc", nvml.nvmlGpmSampleAlloc)
            if sample is None:
                self.close()
                return False
            self._samples.append(sample)
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(METRICS)
        self._request = request
        return True

    def _read(self) -> Readings:
        now = self._clock()
        if self._prev_at is not None and now - self._prev_at < MIN_GAP_S:
            return self._last
        current = self._samples[1] if self._prev_at is not None else self._samples[0]
        if self._call("nvmlGpmSampleGet", self._nvml.nvmlGpmSampleGet, current) is None:
            self._prev_at = None  # start a fresh pair next tick
            return NONE
        if self._prev_at is not None:
            self._last = self._metrics(self._samples[0], current)
            self._samples.reverse()  # the newest sample becomes the first of the next pair
        self._prev_at = now
        return self._last

    def _metrics(self, older: Any, newer: Any) -> Readings:
        request = self._request
        request.sample1 = older
        request.sample2 = newer
        for i, metric_id in enumerate(METRICS):
            request.metrics[i].metricId = metric_id
        if (
            self._caller.call(
                self._index, "nvmlGpmMetricsGet", self._nvml.nvmlGpmMetricsGet, request
            )
            is None
        ):
            return NONE
        values = [
            float(request.metrics[i].value) if request.metrics[i].nvmlReturn == 0 else None
            for i in range(len(METRICS))
        ]
        return values[0], values[1], values[2]

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        return self._caller.call(self._index, what, fn, self._handle, *args)
