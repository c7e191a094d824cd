"""What open live pages cost ``serve --ui``: CPU, memory and tick pace (prints figures).

Setup: ``serve --demo thermal --ui`` (8 simulated GPUs, every rule) at a 1 s interval, as its
own process. First a window with no page open (the baseline), then the same window with
``--clients`` event streams held open from this process, each reading every frame. The
exporter's CPU comes from /proc/PID/stat (all its threads), its memory from VmRSS/VmHWM of
/proc/PID/status, the tick pace from the frames' own times and tick numbers as the browsers
receive them.

    .venv/bin/python benchmarks/bench_live_page.py [--seconds 60] [--clients 50]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.fleet.servers import Exporter, start_exporter

FRAME = re.compile(rb'^data: \{"version": \d+, "time": ([0-9.]+), "tick": (\d+)', re.M)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) in MiB."""
    text = Path(f"/proc/{pid}/status").read_text()
    values = [
        int(re.search(rf"^{key}:\s+(\d+)", text, re.M).group(1)) for key in ("VmRSS", "VmHWM")
    ]  # type: ignore[union-attr]
    return values[0] / 1024, values[1] / 1024


@dataclass
class Stream:
    """One browser's event stream: the (time, tick) of every frame it received."""

    frames: list[tuple[float, int]] = field(default_factory=list)
    closed_early: bool = False


def hold(address: str, stream: Stream, stop: threading.Event) -> None:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"GET /events HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n\r\n")
        buffer = b""
        while not stop.is_set():
            try:
                chunk = sock.recv(1 << 16)
            except TimeoutError:
                continue
            if not chunk:
                stream.closed_early = not stop.is_set()
                return
            buffer += chunk
            *messages, buffer = buffer.split(b"\n\n")
            for message in messages:
                match = FRAME.search(message)
                if match:
                    stream.frames.append((float(match.group(1)), int(match.group(2))))


def window(serve: Exporter, seconds: float) -> tuple[float, float]:
    """CPU % of one core over ``seconds``, and the wall time."""
    cpu0, wall0 = cpu_seconds(serve.proc.pid), time.monotonic()
    time.sleep(seconds)
    return 100 * (cpu_seconds(serve.proc.pid) - cpu0) / (time.monotonic() - wall0), seconds


def pace(streams: list[Stream]) -> str:
    gaps = [b[0] - a[0] for s in streams for a, b in zip(s.frames, s.frames[1:], strict=False)]
    skipped = sum(
        b[1] - a[1] - 1 for s in streams for a, b in zip(s.frames, s.frames[1:], strict=False)
    )
    counts = [len(s.frames) for s in streams]
    closed = sum(s.closed_early for s in streams)
    return (
        f"frames per stream min {min(counts)} / max {max(counts)}, ticks skipped {skipped},"
        f" streams closed early {closed}; gap between ticks mean {statistics.fmean(gaps):.3f} s,"
        f" max {max(gaps):.3f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=50)
    args = parser.parse_args()
    serve = start_exporter("--ui", "--interval", "1", scenario="thermal")
    try:
        time.sleep(3)  # imports and the first ticks are not the steady state
        idle_cpu, _ = window(serve, args.seconds)
        rss, hwm = memory_mib(serve.proc.pid)
        print(f"no page open:     serve CPU {idle_cpu:.2f} % of one core, RSS {rss:.1f} MiB")
        stop = threading.Event()
        streams = [Stream() for _ in range(args.clients)]
        threads = [
            threading.Thread(target=hold, args=(serve.address, s, stop), daemon=True)
            for s in streams
        ]
        for thread in threads:
            thread.start()
        time.sleep(3)  # every stream connected and past its first (history) message
        busy_cpu, _ = window(serve, args.seconds)
        rss, hwm = memory_mib(serve.proc.pid)
        stop.set()
        for thread in threads:
            thread.join(10)
        print(
            f"{args.clients} pages open: serve CPU {busy_cpu:.2f} % of one core,"
            f" RSS {rss:.1f} MiB (peak {hwm:.1f} MiB)"
        )
        print(f"tick pace seen by the pages: {pace(streams)}")
    finally:
        serve.stop()


if __name__ == "__main__":
    main()
