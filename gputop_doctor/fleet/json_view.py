"""Every host's state, last frame and the fleet findings as plain JSON.

What ``snapshot --hosts --json`` prints and what the fleet page of ``serve --ui --hosts``
receives each tick, so both read the fleet alike.
"""

from __future__ import annotations

import dataclasses

from gputop_doctor.fleet.watcher import FleetFrame


def fleet_json(frame: FleetFrame) -> dict[str, object]:
    return {
        "hosts": [
            {
                "label": h.label,
                "state": h.state.value,
                "error": h.error,
                "view": None if h.view is None else dataclasses.asdict(h.view),
            }
            for h in frame.hosts
        ],
        "fleet_findings": [dataclasses.asdict(f) for f in frame.fleet_findings],
    }
