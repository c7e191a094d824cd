"""``thermal-throttle``: the GPU cuts its clocks to stay under its temperature limit.

The driver says why clocks are low through the clock-event reason bits: software or hardware
thermal slowdown (0x20, 0x40), and hardware slowdown (0x08), which we count as thermal only
near the temperature limit because it also covers power brakes. Where the driver exposes the
cumulative throttle counters they give the exact share of time throttled. Independent of the
bits, a temperature at the card's own slowdown threshold (minus a margin) is heat trouble.

The window is a minute so that intermittent throttling is caught, but two flagged samples are
enough and one must be recent: a hot GPU shows up within a few ticks and clears soon after it
cools. When the reason bits are set on the last two ticks, the finding is shown at once (the
driver said so twice; no hold), so onset-to-finding is the second tick. The software power
cap (0x04) is never thermal; that is ``power-cap``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, replace

from gputop_doctor.config.thresholds import ThermalThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, gpu_scope
from gputop_doctor.core.history import History, Window
from gputop_doctor.core.model import ClockEvent, GpuSample, Snapshot, decode_clock_events
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.core.waste import Loss
from gputop_doctor.rules._gpu import is_busy
from gputop_doctor.rules._running import running_groups
from gputop_doctor.rules._window import gpu_columns, window

RULE_ID = "thermal-throttle"

# Plain ints: IntFlag operators are slow in a loop over every sample.
THERMAL_BITS = int(ClockEvent.SW_THERMAL | ClockEvent.HW_THERMAL)
HARD_BITS = int(ClockEvent.HW_THERMAL | ClockEvent.HW_SLOWDOWN)
HW_SLOWDOWN = int(ClockEvent.HW_SLOWDOWN)
# How far from a window's edge a counter's reading is looked for. A live source reads the
# hardware counters at least every 5 s; a counter with no reading this close to the edge is
# one this GPU does not have (an older driver), and looking further would walk the whole
# window for it on every tick.
READING_REACH_S = 10.0


@dataclass(frozen=True, slots=True)
class _Tally:
    busy: int
    flagged: int
    recent: int  # flagged samples within recent_s
    bits: int  # union of the reason bits seen on flagged samples
    counter_fraction: float | None  # from the cumulative counters, when present


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.thermal_throttle
    win = window(history, t.window_s)
    latest = win.latest
    if latest is None:
        return []
    interval = latest.interval_s or 1.0
    recent_n = max(1, round(t.recent_s / interval))
    recent = _thermal_flags(window(history, recent_n * interval), t)
    out = []
    fractions = _counter_fractions(win, {g.index for g in latest.gpus if not g.lost}, recent_n)
    for gpu in latest.gpus:
        if gpu.lost:
            continue
        counters = fractions[gpu.index]
        if not counters and not any(recent.get(gpu.index, ())):
            continue  # nothing recent: the common case costs a few samples per GPU
        samples = [g for g in gpu_columns(win).get(gpu.index, ()) if not g.lost]
        tally = _tally(samples, recent_n, counters, t)
        direct = _bits_on_last_two(samples, t)  # the driver said heat twice in a row
        if direct or _fires(tally, t):
            finding = _finding(gpu.index, samples, tally)
            out.append(replace(finding, hold_s=0.0) if direct else finding)
    return out


def _thermal_flags(win: Window, t: ThermalThresholds) -> Mapping[int, tuple[bool, ...]]:
    """Each GPU's samples over ``win`` judged by :func:`is_thermal`, kept in step with the
    window: each sample judged once, not on every tick it stays recent."""
    return running_groups(  # type: ignore[return-value]
        win, ("thermal flags", t), lambda snap: ((g.index, is_thermal(g, t)) for g in snap.gpus)
    )


def _bits_on_last_two(samples: Sequence[GpuSample], t: ThermalThresholds) -> bool:
    """The driver's reason bits said heat on each of the last two ticks: direct evidence."""
    last = samples[-2:]
    return len(last) == 2 and all(g.clock_event_bits is not None and is_thermal(g, t) for g in last)


def is_thermal(gpu: GpuSample, t: ThermalThresholds) -> bool:
    """One sample shows heat trouble: a thermal reason bit, or the card at its limit."""
    bits = gpu.clock_event_bits
    limit = gpu.slowdown_temp_c
    temp = gpu.temp_c
    if bits is not None:
        if bits & THERMAL_BITS:
            return True
        near = limit if limit is not None else t.fallback_limit_c
        if bits & HW_SLOWDOWN and temp is not None:
            return temp >= near - t.hw_slowdown_margin_c
    if temp is None:
        return False
    if limit is not None:
        return temp >= limit - t.margin_c
    return bits is None and temp >= t.fallback_limit_c


def _tally(
    samples: Sequence[GpuSample],
    recent_n: int,
    counter_fraction: float | None,
    t: ThermalThresholds,
) -> _Tally:
    busy = flagged = recent = bits = 0
    first_recent = len(samples) - recent_n
    for pos, gpu in enumerate(samples):
        hot = is_thermal(gpu, t)
        if hot or is_busy(gpu, t.busy_util_pct):
            busy += 1
        if hot:
            flagged += 1
            recent += pos >= first_recent
            bits |= gpu.clock_event_bits or 0
    return _Tally(busy, flagged, recent, bits, counter_fraction)


def _counter_fractions(win: Window, indices: Set[int], recent_n: int) -> dict[int, float | None]:
    """Each GPU's share of wall time in thermal slowdown, from the driver's cumulative
    nanosecond counters (None where it has none to difference).

    Counts only if the counters also advanced recently, so a past episode clears.
    """
    if len(win.snapshots) < 2:
        return dict.fromkeys(indices)
    readings = _timed_counters(win)
    end = len(readings) - 1
    whole = _shares(readings, indices, 0, end)
    moving = {index for index in indices if whole[index]}
    if moving:  # else none, or no time in slowdown over the window (so none recently)
        recent = _shares(readings, moving, max(0, end - recent_n), end)
        whole.update((index, 0.0) for index in moving if not recent[index])
    return whole


# A snapshot's time and the thermal counters (ns) read there, software then hardware, each
# by GPU index; a GPU is absent from a counter's where it was not read there (missing, or the
# hardware one held by the source between its readings: see ThrottleCounters.hw_held).
_TimedCounters = tuple[float, tuple[Mapping[int, int], Mapping[int, int]]]
# A counter's reading: when, and its value.
_Reading = tuple[float, int]


def _shares(
    readings: Sequence[_TimedCounters], indices: Set[int], start: int, end: int
) -> dict[int, float | None]:
    """Each GPU's share of wall time in thermal slowdown between the window's snapshots
    ``start`` and ``end``, 0 to 1.

    Each counter is differenced between its last reading at or before ``start`` (else its
    first after it) and its last at or before ``end``, over the time between those two
    READINGS, so that a rise read just after ``start`` is measured from the reading before
    it rather than lost: a counter the source
    reads only every few seconds while nothing happens is never taken as standing still
    between its readings (a false 0, then the whole rise in one tick). The software and
    hardware thermal reasons run at the same time (a card at its hardware limit has long been
    past its software one), so their times overlap: the share is the union of the two, never
    their sum (which reads 150 % on a card throttled all along). The counters only say how
    long each ran, so the union is taken as the larger of the two shares, the least it can
    be, and never more than the time that passed. A counter that went back (the driver
    reloaded) leaves no share at all."""
    shares: dict[int, list[float]] = {index: [] for index in indices}
    reloaded: set[int] = set()
    for counter in (0, 1):
        before = _readings(readings, indices, counter, range(start, -1, -1))
        after = _readings(readings, indices - before.keys(), counter, range(start, end + 1))
        lasts = _readings(readings, indices, counter, range(end, start - 1, -1))
        for index, last in lasts.items():
            first = before.get(index) or after.get(index)
            if first is None or last[0] <= first[0]:
                continue
            if last[1] < first[1]:
                reloaded.add(index)
            shares[index].append((last[1] - first[1]) / ((last[0] - first[0]) * 1e9))
    return {
        index: None if index in reloaded or not got else min(1.0, max(got))
        for index, got in shares.items()
    }


def _readings(
    readings: Sequence[_TimedCounters], indices: Set[int], counter: int, positions: range
) -> dict[int, _Reading]:
    """For each of the GPUs ``indices``, the time and value of the first reading of
    ``counter`` (0 software, 1 hardware) among the window's snapshots at ``positions``, in
    their order, no further than :data:`READING_REACH_S` from the first of them; a GPU with
    none is left out. The GPUs walk the positions together: each walks the same few ticks
    from an edge, twice per counter, every tick."""
    found: dict[int, _Reading] = {}
    if not positions or not indices:
        return found
    wanted = set(indices)
    edge = readings[positions[0]][0]
    for at in positions:
        time, by_counter = readings[at]
        if abs(time - edge) > READING_REACH_S:
            break
        values = by_counter[counter]
        if not values:
            continue  # none read here: the hardware counter held between its readings
        for index in wanted.intersection(values):
            found[index] = (time, values[index])
        wanted.difference_update(values)
        if not wanted:
            break
    return found


def _timed_counters(win: Window) -> tuple[_TimedCounters, ...]:
    """Each snapshot's time and its GPUs' thermal counters, position for position with the
    window's snapshots: a view kept in step with the window (each tick's counters picked
    once), read by plain indexing."""
    view = running_groups(win, "thermal counters", _timed_counters_of)
    return view.get(0, ())


def _timed_counters_of(snap: Snapshot) -> tuple[tuple[int, _TimedCounters]]:
    return ((0, (snap.time, _counters_by_gpu(snap))),)


def _counters_by_gpu(snap: Snapshot) -> tuple[dict[int, int], dict[int, int]]:
    """The software and hardware counters read at ``snap``, by GPU: of the first sample of an
    index that has counters."""
    seen: set[int] = set()
    software: dict[int, int] = {}
    hardware: dict[int, int] = {}
    for gpu in snap.gpus:
        if gpu.throttle is None or gpu.index in seen:
            continue
        seen.add(gpu.index)
        counters = gpu.throttle
        if counters.sw_thermal_ns is not None:
            software[gpu.index] = counters.sw_thermal_ns
        hw_thermal = counters.hw_thermal_read_ns  # a held one is unknown now
        if hw_thermal is not None:
            hardware[gpu.index] = hw_thermal
    return software, hardware


def _fires(tally: _Tally, t: ThermalThresholds) -> bool:
    by_samples = (
        tally.flagged >= t.min_samples
        and tally.recent > 0
        and tally.flagged >= t.min_fraction * max(1, tally.busy)
    )
    by_counters = tally.counter_fraction is not None and tally.counter_fraction >= t.min_fraction
    return by_samples or by_counters


def _finding(index: int, samples: Sequence[GpuSample], tally: _Tally) -> Finding:
    gpu = samples[-1]
    limit = gpu.slowdown_temp_c
    share = min(1.0, tally.flagged / max(1, tally.busy))
    if tally.counter_fraction is not None:
        share = max(share, tally.counter_fraction)  # both 0-1: the larger reading, not a sum
    hard = bool(tally.bits & HARD_BITS)
    title = f"GPU {index} throttling for heat"
    if gpu.temp_c is not None:
        title += f": {gpu.temp_c:.0f} °C"
        if limit is not None:
            title += f" (slows at {limit:.0f} °C)"
    if gpu.sm_clock_mhz is not None and gpu.sm_clock_max_mhz:
        title += f", SM clock {gpu.sm_clock_mhz:.0f}/{gpu.sm_clock_max_mhz:.0f} MHz"
    evidence = [Evidence("time throttled", round(share * 100, 1), "% of busy samples")]
    if gpu.temp_c is not None:
        evidence.append(Evidence("temperature", gpu.temp_c, "°C"))
    if limit is not None:
        evidence.append(Evidence("slowdown threshold", limit, "°C"))
    if gpu.sm_clock_mhz is not None:
        evidence.append(Evidence("SM clock", gpu.sm_clock_mhz, "MHz"))
    if gpu.sm_clock_max_mhz is not None:
        evidence.append(Evidence("SM clock max", gpu.sm_clock_max_mhz, "MHz"))
    if gpu.fan_pct is not None:
        evidence.append(Evidence("fan", gpu.fan_pct, "%"))
    if tally.bits:
        evidence.append(Evidence("reasons", ", ".join(decode_clock_events(tally.bits))))
    return Finding(
        rule_id=RULE_ID,
        blame=Blame.MACHINE,
        severity=Severity.CRITICAL if hard else Severity.WARN,
        scope=gpu_scope(index),
        title=title,
        evidence=tuple(evidence),
        fix=(
            "The card is too hot and slows itself down. Improve cooling: check that its fans "
            "spin up, clear dust and blocked airflow in the chassis, leave space between cards, "
            "and check the room or rack inlet temperature. Lowering the power limit "
            "(nvidia-smi -pl) gives up a little peak speed for steady clocks. On a rented "
            "machine, report the node to the provider."
        ),
    )


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=ThermalThresholds,
    advice="improve cooling or airflow; check fans and the inlet temperature",
    gpu_time=Loss.THROTTLED,
)
