"""The session's event log: what a user did from the monitor (signals sent), beside the CSV.

The CSV has one row per GPU per tick and a fixed header; an action is neither, and a column for
it would change the schema of every recording. So each event is one JSON line in a file next to
the recording (``session.csv`` -> ``session.events.jsonl``), appended and closed per event, so
a shared machine keeps a record of who stopped what even if the monitor is killed right after.
Every string is written by ``json.dumps``: a process name cannot break a line or the file.
"""

from __future__ import annotations

import json
import os
import time

EVENTS_SUFFIX = ".events.jsonl"


def events_path(csv_path: str) -> str:
    """``session.csv`` (or ``session.csv.gz``) -> ``session.events.jsonl``."""
    base = csv_path.removesuffix(".gz")
    return base.removesuffix(".csv") + EVENTS_SUFFIX


def append_event(csv_path: str, when: float, kind: str, text: str) -> None:
    """Append one event line; raises OSError when the file cannot be written."""
    line = json.dumps(
        {
            "time_unix_s": when,
            "time_iso": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(when)),
            "event": kind,
            "text": text,
        },
        ensure_ascii=True,
    )
    fd = os.open(
        events_path(csv_path), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644
    )
    try:
        data = (line + "\n").encode("ascii")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
