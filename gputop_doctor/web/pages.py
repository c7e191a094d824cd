"""What ``serve --ui`` adds to the exporter: the live page's hub and, with ``--hosts``, the
fleet page's watcher and hub. The sampler hands each frame to :meth:`LivePages.publish`."""

from __future__ import annotations

import functools
import ssl
from collections.abc import Sequence

from gputop_doctor.core.frame import Frame
from gputop_doctor.fleet.hosts import HostSpec
from gputop_doctor.fleet.watcher import FleetFrame, FleetWatcher
from gputop_doctor.web.fleet_view import fleet_view
from gputop_doctor.web.hub import EventHub
from gputop_doctor.web.live_view import live_view
from gputop_doctor.web.site import LiveSite
from gputop_doctor.web.slowdowns import SlowdownLog


class LivePages:
    def __init__(
        self, hosts: Sequence[HostSpec], interval_s: float, tls: ssl.SSLContext | None = None
    ) -> None:
        self.slowdowns = SlowdownLog()
        self.hub: EventHub[Frame] = EventHub(functools.partial(live_view, slowdowns=self.slowdowns))
        self.fleet_hub: EventHub[FleetFrame] | None = None
        self.watcher: FleetWatcher | None = None
        if hosts:
            self.fleet_hub = EventHub(fleet_view)
            self.watcher = FleetWatcher(hosts, interval_s, tls=tls)
        self.site = LiveSite(self.hub, self.fleet_hub)

    def start(self) -> LivePages:
        if self.watcher is not None:
            self.watcher.start()
        return self

    def publish(self, frame: Frame) -> None:
        """One tick: this node's frame, and every host's latest status for the fleet page (the
        fleet's straggler judgement advances once per tick whether or not a page is open)."""
        self.slowdowns.add(frame)
        self.hub.publish(frame)
        if self.watcher is not None and self.fleet_hub is not None:
            self.fleet_hub.publish(self.watcher.frame())

    def close(self) -> None:
        self.site.close()
        if self.watcher is not None:
            self.watcher.stop()
