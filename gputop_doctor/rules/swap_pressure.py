"""``swap-pressure``: the host is out of RAM and reads memory back from swap.

Every page read back from swap is a disk read in the middle of what should be a memory access,
so a swapping trainer or DataLoader slows to disk speed. The steady swap-in rate is the direct
sign; PSI memory (the share of time tasks stalled waiting for memory) also catches reclaim
stalls on hosts without swap, and its "full" line means every task was stalled at once.

Swapping is host-wide; the finding says whose memory is in swap (``VmSwap`` of the processes
holding most of it, read while the host swaps) and blames the job when its processes hold the
most, a neighbour when outside processes do.
"""

from __future__ import annotations

from collections.abc import Iterator

from gputop_doctor.config.thresholds import SwapThresholds
from gputop_doctor.core.findings import HOST, Blame, Evidence, Finding, Severity
from gputop_doctor.core.history import History, Window
from gputop_doctor.core.model import Snapshot
from gputop_doctor.core.pressure import OutsideProcess
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules import _blame, _stats
from gputop_doctor.rules._gpu import tree_pids
from gputop_doctor.rules._running import running_groups
from gputop_doctor.rules._window import enough_span, window

RULE_ID = "swap-pressure"


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.swap_pressure
    win = window(history, t.window_s)
    latest = win.latest
    if latest is None or not enough_span(win, t.min_span_s):
        return []
    readings = running_groups(win, RULE_ID, _memory_readings)
    swap_in = _stats.mean(readings.get(_SWAP_IN, ()))
    some = _stats.mean(readings.get(_SOME, ()))
    full = _stats.mean(readings.get(_FULL, ()))
    if (swap_in or 0.0) < t.swap_in_mib_s and (some or 0.0) < t.psi_memory_some_pct:
        return []
    parts = []
    if swap_in is not None:
        parts.append(f"{swap_in:.1f} MiB/s read back from swap")
    if some is not None:
        parts.append(f"PSI memory {some:.0f} %")
    blame, holders = _whose(latest)
    if holders:
        top = holders[0]
        parts.append(f"most in swap: {_blame.label(top)} {top.swap_mib or 0:.0f} MiB")
    fix = FIX if blame is not Blame.NEIGHBOUR else NEIGHBOUR_FIX
    if not _blame.attached(latest):
        fix = f"{fix} {_blame.HOST_NOTE}"
    return [
        Finding(
            rule_id=RULE_ID,
            blame=blame,
            severity=Severity.CRITICAL if (full or 0.0) >= t.psi_memory_full_pct else Severity.WARN,
            scope=HOST,
            title="Swapping: " + ", ".join(parts),
            evidence=_evidence(win, swap_in, some, full, latest),
            fix=fix,
        )
    ]


FIX = (
    "The host has run out of RAM. Lower num_workers or prefetch_factor (each worker "
    "holds its own batches and, over time, copies of the Python objects it touches), "
    "keep datasets in NumPy arrays or memory-mapped files rather than lists of Python "
    "objects, shrink in-memory caches, or use a host with more memory."
)
NEIGHBOUR_FIX = (
    "The host has run out of RAM and most of what is in swap belongs to processes outside the "
    "job. Stop or shrink them, give the job a memory reservation (a cgroup memory.min), or run "
    "on a dedicated instance; the job's own settings (num_workers, prefetch_factor) are not the "
    "cause."
)


def _whose(latest: Snapshot) -> tuple[Blame, tuple[OutsideProcess, ...]]:
    """Who holds the memory in swap: the job (its tree holds the most), a neighbour, or
    unknown (no job attached, or nothing read)."""
    holders = latest.host.swap_holders
    if not _blame.attached(latest) or not holders:
        return Blame.UNKNOWN, holders
    tree = tree_pids(latest)  # the tick's, gathered once for every rule
    job = sum(p.swap_mib or 0.0 for p in holders if p.pid in tree)
    others = sum(p.swap_mib or 0.0 for p in holders if p.pid not in tree)
    return (Blame.JOB if job >= others else Blame.NEIGHBOUR), holders


_SWAP_IN, _SOME, _FULL = "swap in", "some", "full"


def _memory_readings(snap: Snapshot) -> Iterator[tuple[str, float]]:
    """A tick's swap-in rate and memory pressure, each when read: kept in step with the
    window (in its order, so the same means), not gathered from each of its snapshots, three
    times, every tick."""
    host = snap.host
    if host.swap_in_mib_s is not None:
        yield _SWAP_IN, host.swap_in_mib_s
    psi = host.psi_memory
    if psi is not None:
        yield _SOME, psi.some_avg10
        if psi.full_avg10 is not None:
            yield _FULL, psi.full_avg10


def _evidence(
    win: Window, swap_in: float | None, some: float | None, full: float | None, latest: Snapshot
) -> tuple[Evidence, ...]:
    host = latest.host
    items = []
    if swap_in is not None:
        items.append(Evidence("swap in", round(swap_in, 2), "MiB/s"))
    swap_out = _stats.mean(win.values(lambda s: s.host.swap_out_mib_s))
    if swap_out is not None:
        items.append(Evidence("swap out", round(swap_out, 2), "MiB/s"))
    if some is not None:
        items.append(Evidence("PSI memory some", round(some, 1), "%"))
    if full is not None:
        items.append(Evidence("PSI memory full", round(full, 1), "%"))
    if host.swap_used_mib is not None:
        items.append(Evidence("swap used", round(host.swap_used_mib, 1), "MiB"))
    if host.mem_available_mib is not None and host.mem_total_mib:
        share = host.mem_available_mib / host.mem_total_mib * 100
        items.append(Evidence("memory available", round(share, 1), "%"))
    for proc in latest.host.swap_holders:
        items.append(Evidence(f"in swap: {_blame.label(proc)}", proc.swap_mib or 0.0, "MiB"))
    biggest = max(latest.processes, key=lambda p: p.rss_mib or 0.0, default=None)
    if biggest is not None and biggest.rss_mib:
        items.append(Evidence(f"largest: {biggest.name} ({biggest.pid})", biggest.rss_mib, "MiB"))
    return tuple(items)


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=SwapThresholds,
    advice="use less host memory or add RAM; swapping stalls every step",
)
