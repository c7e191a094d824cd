"""Generators of the logs people bring to ``analyze``: dense ``-lms`` logs, Windows UTF-16
logs, ``dcgmi dmon`` text, a power-capped GPU logged without reason bits or limit."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

START = datetime(2024, 1, 15, 10, 0, 0, tzinfo=timezone.utc)
H100_PCIE = "NVIDIA H100 PCIe"


def stamp(seconds: float) -> str:
    return f"{START + timedelta(seconds=seconds):%Y/%m/%d %H:%M:%S.%f}"[:-3]


LMS_HEADER = (
    "timestamp, name, utilization.gpu [%], power.draw [W], clocks.sm [MHz], temperature.gpu\n"
)


def lms_log(rows: int, every_ms: int, util: Callable[[int], float], name: str = H100_PCIE) -> str:
    """A one-GPU ``--query-gpu ... -lms every_ms`` log with units, ``util(row)`` per row."""
    return LMS_HEADER + "".join(lms_rows(range(rows), every_ms, util, name))


def lms_rows(
    rows: Iterable[int], every_ms: int, util: Callable[[int], float], name: str = H100_PCIE
) -> Iterator[str]:
    for i in rows:
        yield f"{stamp(i * every_ms / 1000)}, {name}, {util(i):.0f} %, 200.00 W, 1700 MHz, 60\n"


def capped_log(seconds: int, every_ms: int = 100, clock_mhz: int = 835) -> str:
    """A GEMM on an H100 PCIe at its 350 W cap: held at 835 MHz of 1755 unless ``clock_mhz``
    says otherwise; no limit, no reason bits."""
    rows = seconds * 1000 // every_ms
    head = (
        "timestamp, name, utilization.gpu [%], power.draw [W], clocks.sm [MHz], temperature.gpu\n"
    )
    body = "".join(
        f"{stamp(i * every_ms / 1000)}, {H100_PCIE}, 100 %, {348.5 + i % 3 * 0.5:.2f} W, "
        f"{clock_mhz + i % 5} MHz, 71\n"
        for i in range(rows)
    )
    return head + body


def dcgmi_log(samples: int) -> str:
    """``dcgmi dmon -e 203,155,150,100,252`` on two GPUs: GPU 0 hot and busy, GPU 1 idle."""
    lines = ["#Entity   GPUTL  POWER   GTEMP  SMCLK  FBUSD", "ID"]
    for i in range(samples):
        if i and i % 20 == 0:  # dcgmi repeats its header now and then
            lines += ["#Entity   GPUTL  POWER   GTEMP  SMCLK  FBUSD", "ID"]
        lines.append(f"GPU 0     99     {300 + i % 7}.5   95     1100   40211")
        lines.append("GPU 1     0      61.0    38     210    N/A")
    return "\n".join(lines) + "\n"


def write_encoded(path: Path, text: str, encoding: str, bom: bytes) -> str:
    """``text`` as Windows PowerShell's ``>`` writes it: a BOM, then CRLF lines."""
    path.write_bytes(bom + text.replace("\n", "\r\n").encode(encoding))
    return str(path)
