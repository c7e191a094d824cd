"""All hosts at once: a poller per host and the fleet findings over their latest frames."""

from __future__ import annotations

import ssl
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from gputop_doctor.fleet.hosts import HostSpec, Transport
from gputop_doctor.fleet.poller import (
    HTTP_TIMEOUT_S,
    SSH_FIRST_FRAME_S,
    STOP_WAIT_S,
    HostPoller,
)
from gputop_doctor.fleet.straggler import StragglerTracker, straggler_findings
from gputop_doctor.fleet.view import HostState, HostStatus, RemoteFinding


@dataclass(frozen=True, slots=True)
class FleetFrame:
    hosts: tuple[HostStatus, ...]
    fleet_findings: tuple[RemoteFinding, ...]


class FleetWatcher:
    def __init__(
        self, specs: Sequence[HostSpec], interval_s: float, tls: ssl.SSLContext | None = None
    ) -> None:
        self.pollers = [HostPoller(spec, interval_s, tls=tls) for spec in specs]
        self._jobs = {spec.label: spec.job for spec in specs}
        self._stragglers = StragglerTracker(self._jobs)

    def start(self) -> FleetWatcher:
        for poller in self.pollers:
            poller.start()
        return self

    def frame(self) -> FleetFrame:
        """Every host now; ``straggler-node`` judged over each host's last frames."""
        hosts = tuple(p.status() for p in self.pollers)
        return FleetFrame(hosts, self._stragglers.observe(hosts))

    def single_frame(self) -> FleetFrame:
        """Every host now, ``straggler-node`` judged on these frames alone (one look)."""
        hosts = tuple(p.status() for p in self.pollers)
        return FleetFrame(hosts, straggler_findings(hosts, self._jobs))

    def stop(self) -> None:
        """Stop every poller and wait for the ssh ones to reap their ssh (no child outlives
        the view); an HTTP poller's thread ends at its next deadline on its own."""
        for poller in self.pollers:
            poller.stop()
        end = time.monotonic() + 2 * STOP_WAIT_S + 1
        for poller in self.pollers:
            if poller.spec.transport is Transport.SSH:
                poller.join(max(0.0, end - time.monotonic()))


def fetch_fleet(
    specs: Sequence[HostSpec], interval_s: float = 1.0, tls: ssl.SSLContext | None = None
) -> FleetFrame:
    """Every host once, in parallel, each bounded by its deadline (``snapshot --hosts``)."""
    watcher = FleetWatcher(specs, interval_s, tls)
    http = [p for p in watcher.pollers if p.spec.transport is Transport.HTTP]
    with ThreadPoolExecutor(max_workers=min(32, len(http) or 1)) as pool:
        list(pool.map(HostPoller.fetch_once, http))
    ssh = [p for p in watcher.pollers if p.spec.transport is Transport.SSH]
    for poller in ssh:
        poller.start()
    deadline = time.monotonic() + SSH_FIRST_FRAME_S + 1  # a poller says UNREACHABLE by then
    while ssh and time.monotonic() < deadline:
        if all(p.status().state is not HostState.CONNECTING for p in ssh):
            break
        time.sleep(0.1)
    frame = watcher.single_frame()
    watcher.stop()
    return FleetFrame(
        tuple(
            h
            if h.state is not HostState.CONNECTING
            else HostStatus(h.label, HostState.UNREACHABLE, error=h.error or "no frame yet")
            for h in frame.hosts
        ),
        frame.fleet_findings,
    )


__all__ = ["HTTP_TIMEOUT_S", "SSH_FIRST_FRAME_S", "FleetFrame", "FleetWatcher", "fetch_fleet"]
