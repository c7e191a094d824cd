"""Running views over windows that reach into the history's thinned older part give, tick by
tick, what a view built from scratch over the same snapshots gives: the same groups, in the
same order, with the same values (and the real serial numbers, where numbered)."""

from __future__ import annotations

from collections.abc import Hashable, Iterator

import pytest

from gputop_doctor.core.health import GpuHealth, XidEvent
from gputop_doctor.core.history import History, Retention, Window
from gputop_doctor.core.model import GpuSample, Snapshot
from gputop_doctor.rules._running import running_groups
from tests.builders import T0

# A small history that thins within a few hundred ticks: 40 ticks whole, 30 older slots.
KEEP = Retention(span=400, full=40, old_slots=30, processes=40, anchor=10)


def tick(k: int) -> Snapshot:
    """GPU 2 comes and goes; GPU 1 has an Xid now and then (pinned ticks)."""
    xids = (XidEvent(13, T0 + k),) if k % 37 == 5 else ()
    gpus = [GpuSample(0, util_pct=float(k % 7)), GpuSample(1, health=GpuHealth(xids=xids))]
    if (k // 50) % 2:
        gpus.append(GpuSample(2, util_pct=float(k % 3)))
    return Snapshot(time=T0 + k, tick=k, interval_s=1.0, gpus=tuple(gpus))


def utils(snap: Snapshot) -> Iterator[tuple[Hashable, object]]:
    return ((gpu.index, gpu.util_pct) for gpu in reversed(snap.gpus))


def xids(snap: Snapshot) -> Iterator[tuple[Hashable, object]]:
    return ((g.index, g.health.xids) for g in snap.gpus if g.health is not None and g.health.xids)


def from_scratch(
    win: Window, derive: object, by_appearance: bool, numbered: bool
) -> dict[Hashable, tuple[object, ...]]:
    serials = list(win.older_serials)
    serials += range(win.serial - (len(win) - len(serials)) + 1, win.serial + 1)
    out: dict[Hashable, list[object]] = {}
    for serial, snap in zip(serials, win.snapshots, strict=True):
        for group, value in derive(snap):  # type: ignore[operator]
            out.setdefault(group, []).append((serial, value) if numbered else value)
    order = list(out) if by_appearance else sorted(out)  # type: ignore[type-var]
    return {group: tuple(out[group]) for group in order}


@pytest.mark.parametrize(("by_appearance", "numbered"), [(False, False), (True, True)])
def test_views_over_thinned_windows_match_a_rebuild(by_appearance: bool, numbered: bool) -> None:
    hist = History(KEEP)
    thinned_seen = 0
    for k in range(700):
        hist.append(tick(k))
        for win in (hist.window(300.0), hist.all(), hist.window(30.0)):
            for key, derive in (("utils", utils), ("xids", xids)):
                got = running_groups(
                    win, key, derive, by_appearance=by_appearance, numbered=numbered
                )
                want = from_scratch(win, derive, by_appearance, numbered)
                assert list(got) == list(want), k
                assert dict(got) == want, k
            thinned_seen += win.thinned
    assert thinned_seen > 500  # most ticks had a thinned window to check
    ticks = [s.tick for s in hist.all()]
    assert len(ticks) <= KEEP.full + KEEP.old_slots
    assert [t for t in ticks[: -KEEP.full] if t % 37 == 5]  # Xid ticks outlived thinning
