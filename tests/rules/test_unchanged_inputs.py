"""Rules that answer as last tick while their declared inputs stand still (``rules._unchanged``).

Two things must hold for that to be safe. The declaration must be complete: every attribute
the rule reads of a snapshot, a GPU sample and the context is declared, and it reads no snapshot
outside its declared window; a forgotten input would let a changed reading go unseen. And the
reused answers must be the rule's own, tick by tick, while the readings stand still (the same
health objects handed on), move, come and go, and the window's length changes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest

from gputop_doctor.config import Settings
from gputop_doctor.core.findings import Finding
from gputop_doctor.core.health import GpuHealth, NvLink, XidEvent
from gputop_doctor.core.history import History, Retention, Window
from gputop_doctor.core.model import GpuSample, Snapshot
from gputop_doctor.core.rule import Check, RuleContext
from gputop_doctor.rules import RULES, ecc_errors, gpu_xid, pcie_link_degraded
from gputop_doctor.rules._running import running_groups
from gputop_doctor.rules._unchanged import Inputs, ReusedWhileUnchanged
from tests.builders import NV4, T0, context, gpu, healthy

DECLARED = [rule for rule in RULES if isinstance(rule.check, ReusedWhileUnchanged)]
WINDOW_S = 15.0  # every declared rule's window, shortened so that the story stays short
TICKS = 300


def _settings() -> Settings:
    base = Settings()
    rules = base.rules
    return replace(
        base,
        rules=replace(
            rules,
            ecc_errors=replace(rules.ecc_errors, window_s=WINDOW_S),
            nvlink_errors=replace(rules.nvlink_errors, window_s=WINDOW_S),
            gpu_xid=replace(rules.gpu_xid, event_window_s=WINDOW_S),
            pcie_link_degraded=replace(rules.pcie_link_degraded, window_s=WINDOW_S),
        ),
    )


SETTINGS = _settings()


# Handed on as the same objects while they stand still, as the NVML source does.
STILL = healthy()
CORRECTED = healthy(ecc_volatile_corrected=2000)
PCIE_GEN3 = healthy(pcie_gen=3)
LINK_DOWN = healthy(nvlinks=(NvLink(0, False, 4), *NV4[1:]))
UNCORRECTED = healthy(ecc_volatile_uncorrected=2)


def _gpuhealthy(index: int, k: int) -> GpuHealth | None:
    """Each GPU's story: a PCIe link trained low, errors that rise and then stand still,
    Xids, an NVLink down, a loss."""
    if index == 0:
        return PCIE_GEN3 if 30 <= k < 50 else LINK_DOWN if 190 <= k < 200 else STILL
    if index == 1:
        if 60 <= k < 65:
            return healthy(ecc_volatile_corrected=400 * (k - 59))  # rising: new each tick
        return CORRECTED if k >= 65 else STILL
    if index == 2 and k in (100, 160):
        return healthy(xids=(XidEvent(79 if k == 160 else 13, T0 + k),))
    if index == 3 and 220 <= k < 225:
        return UNCORRECTED
    return STILL


def _snapshot(k: int, interval_s: float = 1.0) -> Snapshot:
    gpus = tuple(
        gpu(
            i,
            util=0.0 if i == 0 and 40 <= k < 45 else 95.0,  # idle a while: its link not judged
            health=_gpuhealthy(i, k),
            lost=(i == 3 and 130 <= k < 140),
        )
        for i in range(4)
    )
    if k >= 265:  # a fifth GPU appears
        gpus += (gpu(4, health=STILL),)
    # The clock steps back once (windows shrink), and one tick comes late (they grow).
    late = k - (5.0 if k >= 250 else 0.0) + (3.0 if k == 280 else 0.0)
    return Snapshot(time=T0 + late * interval_s, tick=k, interval_s=interval_s, gpus=gpus)


def _story() -> Iterator[tuple[History, Snapshot]]:
    hist = History.for_span(Settings().history_s, 1.0)
    for k in range(TICKS):
        snap = _snapshot(k)
        hist.append(snap)
        yield hist, snap


# -- the declaration is complete ------------------------------------------------------------------


# Where the history and its windows read themselves, and the running views (rules._running), whose
# answers over thinned and sliding windows are proven equal to a rebuild by test_running_views.py
# and test_thinned_views.py: their reads of a window are not the rule's.
_MACHINERY = frozenset(
    {
        sys.modules[History.__module__].__file__,
        sys.modules[running_groups.__module__].__file__,
    }
)
# What a declared rule may read of its history and windows: the window of its declared length
# and the snapshots in it. Anything else (a window's span or thinning, the history's newest
# snapshot's time) is an input that the declaration does not compare.
_STRUCTURE = {"History": {"window"}, "Window": {"snapshots"}}


@contextmanager
def _recorded_reads(
    monkeypatch: pytest.MonkeyPatch, judged: object
) -> Iterator[list[tuple[str, str, int]]]:
    """Every attribute read of a snapshot, a GPU sample, a health record or a context: (class,
    name, object id). Not a property (the attributes it reads are recorded), nor what is read
    while the rule's declared judgement of a sample runs. Of the history and its windows, every
    attribute the rule's own code reads, properties too (a window's span is made of times)."""
    reads: list[tuple[str, str, int]] = []
    judging = getattr(judged, "__code__", None)
    for cls in (Snapshot, GpuSample, GpuHealth, RuleContext):

        def traced(self: object, name: str, cls: type = cls) -> object:
            derived = isinstance(getattr(cls, name, None), property)
            if not name.startswith("__") and not derived and not _inside(judging):
                reads.append((cls.__name__, name, id(self)))
            return object.__getattribute__(self, name)

        monkeypatch.setattr(cls, "__getattribute__", traced)
    for structure in (History, Window):

        def by_the_rule(self: object, name: str, cls: type = structure) -> object:
            caller = sys._getframe(1).f_code.co_filename
            if not name.startswith("__") and caller not in _MACHINERY:
                reads.append((cls.__name__, name, id(self)))
            return object.__getattribute__(self, name)

        monkeypatch.setattr(structure, "__getattribute__", by_the_rule)
    try:
        yield reads
    finally:
        monkeypatch.undo()


def _inside(code: object) -> bool:
    frame = sys._getframe(2)
    while code is not None and frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def undeclared_reads(check: Check, inputs: Inputs, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """What ``check`` read over the story that ``inputs`` does not declare."""
    ctx = context(SETTINGS)
    allowed = {
        "Snapshot": {"gpus"},
        "GpuSample": set(inputs.gpu) | ({"health"} if inputs.health else set()),
        "GpuHealth": set(inputs.health),
        "RuleContext": set(inputs.context),
        **_STRUCTURE,
    }
    found: set[str] = set()
    for hist, _ in _story():
        in_window = {id(s) for s in hist.window(inputs.window_s(ctx.settings)).snapshots}
        with _recorded_reads(monkeypatch, inputs.judged) as reads:
            list(check(hist, ctx))
        for cls, name, obj in reads:
            if name not in allowed[cls]:
                found.add(f"{cls}.{name}")
            if cls == "Snapshot" and obj not in in_window:
                found.add("a snapshot outside the declared window")
    return found


@pytest.mark.parametrize("rule", DECLARED, ids=lambda rule: rule.rule_id)
def test_a_declared_rule_reads_only_what_it_declares(
    rule: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrapped = rule.check  # type: ignore[attr-defined]
    assert undeclared_reads(wrapped.check, wrapped.inputs, monkeypatch) == set()


def test_a_forgotten_input_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: an attribute left out, a window declared too short."""
    no_lost = replace(ecc_errors.INPUTS, gpu=("index",))
    assert undeclared_reads(ecc_errors.check, no_lost, monkeypatch) == {"GpuSample.lost"}
    fields = ecc_errors.INPUTS.health
    no_remap = replace(ecc_errors.INPUTS, health=tuple(f for f in fields if f != "remap_failure"))
    assert undeclared_reads(ecc_errors.check, no_remap, monkeypatch) == {"GpuHealth.remap_failure"}
    unjudged = replace(pcie_link_degraded.INPUTS, judged=None)
    assert undeclared_reads(pcie_link_degraded.check, unjudged, monkeypatch) >= {
        "GpuSample.util_pct"
    }

    def timed(history: History, ctx: RuleContext) -> list[Finding]:
        """ecc-errors that also looks at how many seconds its window spans."""
        if history.window(WINDOW_S).span_s < 0:
            return []
        return list(ecc_errors.check(history, ctx))

    assert undeclared_reads(timed, ecc_errors.INPUTS, monkeypatch) == {
        "Window.span_s",
        "Snapshot.time",  # what the span is made of
        "Snapshot.interval_s",
    }
    short = replace(gpu_xid.INPUTS, window_s=lambda settings: 5.0)
    assert "a snapshot outside the declared window" in undeclared_reads(
        gpu_xid.check, short, monkeypatch
    )


def test_the_health_rules_are_declared() -> None:
    assert {rule.rule_id for rule in DECLARED} >= {
        "ecc-errors",
        "nvlink-errors",
        "gpu-xid",
        "pcie-link-degraded",
    }


# -- the reused answers are the rule's own --------------------------------------------------


def _counted(check: Check) -> tuple[Callable[..., list[Finding]], list[int]]:
    calls = [0]

    def counting(history: History, ctx: RuleContext) -> list[Finding]:
        calls[0] += 1
        return list(check(history, ctx))

    return counting, calls


@pytest.mark.parametrize("rule", DECLARED, ids=lambda rule: rule.rule_id)
def test_reused_answers_equal_the_rules_own_every_tick(rule: object) -> None:
    declared = rule.check  # type: ignore[attr-defined]
    counting, calls = _counted(declared.check)
    reusing = ReusedWhileUnchanged(declared.inputs, counting)
    ctx = context(SETTINGS)
    own = History.for_span(Settings().history_s, 1.0)
    fired = 0
    for hist, snap in _story():
        own.append(snap)
        if snap.tick == 240:  # new settings of the same values: judged again
            ctx = replace(ctx, settings=_settings())
        answer = list(reusing(hist, ctx))
        assert answer == list(declared.check(own, ctx)), snap.tick
        fired += bool(answer)
    assert fired, "the story must give the rule something to find"
    # Judged again for a window's length after each change, the last answer reused otherwise.
    assert calls[0] < TICKS * 3 // 4, "while the health stands still, the answer is reused"


@pytest.mark.parametrize("rule", DECLARED, ids=lambda rule: rule.rule_id)
def test_reused_answers_equal_the_rules_own_on_a_thinned_history(rule: object) -> None:
    """At 0.1 s a tick the history keeps every tick only for its recent part and thins the
    older one, so the declared windows reach into thinned snapshots: the window's length in
    snapshots changes as ticks are thinned out of it, and the answers must still be the rule's
    own."""
    declared = rule.check  # type: ignore[attr-defined]
    reusing = ReusedWhileUnchanged(declared.inputs, declared.check)
    ctx = context(SETTINGS)
    keep = Retention.for_span(WINDOW_S * 2, 0.1, full_s=3.0, process_window_s=1.0)
    hist, own = History(keep), History(keep)
    thinned = 0
    for k in range(TICKS):
        snap = _snapshot(k, interval_s=0.1)
        hist.append(snap)
        own.append(snap)
        assert list(reusing(hist, ctx)) == list(declared.check(own, ctx)), k
        thinned += own.window(WINDOW_S).thinned
    assert thinned > TICKS // 2, "most windows must reach into the thinned part"


def test_a_missed_tick_starts_a_new_run() -> None:
    """Called on every other tick only, the rule cannot know that the ticks in between stood
    still: it judges again each time."""
    counting, calls = _counted(ecc_errors.check)
    reusing = ReusedWhileUnchanged(ecc_errors.INPUTS, counting)
    ctx = context(SETTINGS)
    for hist, snap in _story():
        if snap.tick % 2 == 0:
            assert list(reusing(hist, ctx)) == list(ecc_errors.check(hist, ctx))
    assert calls[0] == TICKS // 2


@pytest.mark.parametrize("rule", DECLARED, ids=lambda rule: rule.rule_id)
def test_traffic_alone_moving_leaves_the_answer_reused(rule: object) -> None:
    """A busy NVLink's traffic makes a new health record each tick; the fields a rule reads
    stand still, so after one window's length it answers as before without judging again."""
    declared = rule.check  # type: ignore[attr-defined]
    counting, calls = _counted(declared.check)
    reusing = ReusedWhileUnchanged(declared.inputs, counting)
    ctx = context(SETTINGS)
    hist = History.for_span(Settings().history_s, 1.0)
    for k in range(60):
        moving = healthy(nvlink_rx_mib_s=1000.0 + k, nvlink_tx_mib_s=900.0 + k)
        hist.append(Snapshot(time=T0 + k, tick=k, interval_s=1.0, gpus=(gpu(0, health=moving),)))
        assert list(reusing(hist, ctx)) == list(declared.check(hist, ctx))
    assert calls[0] <= WINDOW_S + 2


def test_a_declaration_naming_nothing_reads_an_empty_tuple() -> None:
    """No health fields and no context attributes declared: each reads as ``()``, not a
    ``TypeError`` from ``attrgetter()`` called with no names."""
    inputs = Inputs(window_s=lambda s: WINDOW_S, gpu=("util_pct",), context=())
    snap = Snapshot(time=T0, tick=0, interval_s=1.0, gpus=(gpu(0, util=40.0),))
    assert inputs.fields(snap) == (40.0,)
    assert inputs.of_context(context(SETTINGS)) == ()
