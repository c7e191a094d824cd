"""What the fleet page receives per tick: every host's state, verdict, GPUs and findings.

The same JSON as ``snapshot --hosts --json`` (:func:`gputop_doctor.fleet.json_view.fleet_json`),
so the page and the one-shot command read the fleet alike. The hosts' text was made printable
when their frames were decoded; the page still sets all of it as text.
"""

from __future__ import annotations

from typing import Any

from gputop_doctor.fleet.json_view import fleet_json
from gputop_doctor.fleet.watcher import FleetFrame


def fleet_view(frame: FleetFrame, with_history: bool = False) -> dict[str, Any]:
    """The page's object for one tick; the fleet keeps no history (``with_history`` unused)."""
    del with_history
    return dict(fleet_json(frame))
