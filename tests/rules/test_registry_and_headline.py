"""The registry, thresholds as settings, hysteresis through the tracker, and the headline."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gputop_doctor.config import RuleThresholds, Settings
from gputop_doctor.core.history import History, Window
from gputop_doctor.core.model import Snapshot
from gputop_doctor.core.rule import RuleSpec
from gputop_doctor.core.verdict import Bottleneck, Case
from gputop_doctor.report.advice import advice
from gputop_doctor.rules import RULES, cpu_saturation, gpu_starvation
from gputop_doctor.rules.headline import UtilFigures, classify, decide, util_figures
from tests.builders import (
    Tick,
    context,
    gpu,
    history,
    host,
    proc,
    sawtooth,
    snapshot,
    track,
    trainer,
)

EXPECTED_IDS = {
    "gpu-starvation",
    "cpu-saturation",
    "thread-oversubscription",
    "blas-openblas-on-intel",
    "openblas-coretype",
    "thermal-throttle",
    "power-cap",
    "gpu-memory-creep",
    "gpu-unused",
    "dataparallel",
    "gpu-imbalance",
    "gpu-idle-memory",
    "io-bound",
    "swap-pressure",
}
DOCS = Path(__file__).resolve().parents[2] / "gputop_doctor" / "rules" / "pages"

RULE_IDS = tuple(rule.rule_id for rule in RULES)


def test_registry_has_every_rule_once() -> None:
    assert len(RULE_IDS) == len(set(RULE_IDS))
    assert set(RULE_IDS) >= EXPECTED_IDS
    for rule_id in RULE_IDS:
        assert rule_id == rule_id.lower() and " " not in rule_id and "_" not in rule_id


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.rule_id)
def test_every_rule_declares_its_spec_once(rule: RuleSpec) -> None:
    """The spec's thresholds class is the one under the rule's settings key; it has advice."""
    thresholds = getattr(Settings().rules, rule.rule_id.replace("-", "_"))
    assert type(thresholds) is rule.thresholds
    assert rule.advice and advice(rule.rule_id) == rule.advice
    assert rule.rule_id in repr(rule)


def test_rule_thresholds_are_in_registry_order() -> None:
    """config/thresholds.py reads in the order the engine runs the rules."""
    keys = [f.name for f in dataclasses.fields(RuleThresholds)]
    registered = [k for k in keys if k.replace("_", "-") in RULE_IDS]
    assert registered == [r.replace("-", "_") for r in RULE_IDS]


@pytest.mark.parametrize("rule_id", sorted(RULE_IDS))
def test_every_rule_has_thresholds_and_a_docs_page(rule_id: str) -> None:
    """Every registered rule, ours or added later: thresholds in settings, keys in its page."""
    key = rule_id.replace("-", "_")
    thresholds = getattr(Settings().rules, key)
    assert dataclasses.is_dataclass(thresholds)
    page = (DOCS / f"{rule_id}.md").read_text()
    for field in dataclasses.fields(thresholds):
        assert f"rules.{key}.{field.name}" in page, f"{rule_id}.md misses {field.name}"


def test_thresholds_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings().rules.gpu_starvation.mean_util_pct = 1.0  # type: ignore[misc]
    assert {f.name for f in dataclasses.fields(RuleThresholds)} >= {
        i.replace("-", "_") for i in EXPECTED_IDS
    }


def test_all_rules_are_quiet_on_a_healthy_job() -> None:
    def healthy(k: int) -> Tick:
        return Tick(gpus=(gpu(0), gpu(1, pids=(101,))), procs=trainer(), host=host())

    ctx = context(vendor="GenuineIntel")
    hist = history(healthy, 120)
    assert [f for rule in RULES for f in rule(hist, ctx)] == []


# -- hysteresis through FindingTracker ------------------------------------------------------


def _flapping(k: int) -> Tick:
    """Starved for 20 s, fed for 40 s."""
    util = sawtooth(k) if k < 20 else (96.0,) * 6
    return Tick(gpus=(gpu(0, util=util),), procs=trainer(worker_cpu=97.0), host=host())


def test_finding_waits_for_hold_and_clears_after_absence() -> None:
    shown = track(gpu_starvation.RULE, _flapping, 80)
    raised = [k for k, found in enumerate(shown) if found]
    assert raised, "never shown"
    first, last = raised[0], raised[-1]
    # A clear sawtooth is judged after 6 s of history (clear_min_span_s), the tracker holds 3 s
    # more: within 12 s of onset at 1 s ticks.
    assert 8 <= first <= 12
    # Shown without gaps until well after the GPU is fed again (the 30 s window drains, then
    # the tracker keeps it for clear_s more).
    assert raised == list(range(first, last + 1))
    assert 25 < last < 75
    assert all(f[0].since <= shown[first][0].since for f in shown if f)


def test_a_blip_shorter_than_hold_is_never_shown() -> None:
    def blip(k: int) -> Tick:
        busy = 99.0 if k in (5, 6) else 20.0
        return Tick(procs=(proc(100, busy), proc(101, busy, ppid=100)), host=host(cpu_pct=busy))

    ctx = context(cpus=2.0)
    shown = track(cpu_saturation.RULE, blip, 30, ctx, hold_s=5.0)
    assert not any(shown)


# -- headline -------------------------------------------------------------------------------

T = Settings().rules.headline
CASES = [
    ("light-steady", 35.0, 0.0, 0.1, 0.2, Case.SMALL_SIMPLE, Bottleneck.NONE),
    ("sawtooth-cpu-busy", 45.0, 0.5, 0.9, 0.9, Case.SMALL_COMPLEX, Bottleneck.DATA),
    ("sawtooth-cpu-idle", 45.0, 0.5, 0.9, 0.2, Case.SMALL_COMPLEX, Bottleneck.DATA),
    ("busy-steady", 96.0, 0.0, 0.03, 0.2, Case.LARGE_SIMPLE, Bottleneck.GPU),
    ("busy-cpu-busy", 88.0, 0.05, 0.2, 0.85, Case.LARGE_COMPLEX, Bottleneck.BOTH),
]


@pytest.mark.parametrize(
    ("name", "util", "idle", "cv", "cpu", "case", "bottleneck"), CASES, ids=[c[0] for c in CASES]
)
def test_headline_four_cases(
    name: str,
    util: float,
    idle: float,
    cv: float,
    cpu: float,
    case: Case,
    bottleneck: Bottleneck,
) -> None:
    headline = decide(util, idle, cv, cpu, 1, T)
    assert (headline.case, headline.bottleneck) == (case, bottleneck)
    assert f"{util:.0f} %" in headline.text
    assert headline.model in ("small", "large") and headline.data in ("simple", "complex")


def test_headline_from_a_history() -> None:
    def starved(k: int) -> Tick:
        return Tick(
            gpus=(gpu(0, util=sawtooth(k)),),
            procs=trainer(worker_cpu=97.0),
            host=host(cpu_pct=80.0, effective_cpus=8.0),
        )

    headline = classify(history(starved, 30), context())
    assert headline.case is Case.SMALL_COMPLEX
    assert headline.bottleneck is Bottleneck.DATA
    assert "waits for the host" in headline.text


@pytest.mark.parametrize(
    ("ticks", "gpus", "text"),
    [
        (3, (gpu(0),), "Watching"),
        (30, (), "No GPU readings"),
        (30, (gpu(0, pids=()),), "No training process holds a GPU"),
    ],
)
def test_headline_says_why_it_cannot_classify(ticks: int, gpus: tuple, text: str) -> None:
    headline = classify(history(lambda k: Tick(gpus=gpus, procs=trainer()), ticks), context())
    assert headline.case is Case.UNKNOWN and headline.bottleneck is Bottleneck.UNKNOWN
    assert text in headline.text
    assert headline.model is None


def test_headline_figures_are_reused_only_for_the_same_samples() -> None:
    """The last tick's figures come back for equal samples (a pegged or idle GPU), and are
    worked out again, the same as a window outside any history gets, when any sample moves."""
    history = History(10)
    history.append(Snapshot(time=0.0, tick=0, interval_s=1.0))
    win = history.window(30.0)
    pegged = [100.0, 100.0, 0.0, 97.0] * 50
    first = util_figures(win, "job", pegged, 10.0)
    assert first == UtilFigures(74.25, 0.25, first.cv) and first.cv is not None
    assert util_figures(win, "job", list(pegged), 10.0) is first
    moved = [*pegged[:-1], 96.0]
    again = util_figures(win, "job", moved, 10.0)
    assert again is not first and again.mean < first.mean
    assert again == util_figures(Window(win.snapshots), "job", moved, 10.0)
    assert util_figures(win, "job", moved, 0.0).idle == 0.25  # another idle line: computed


def test_a_gpu_reading_the_same_samples_hands_on_the_same_tick() -> None:
    """A pegged GPU's ticks are one object while its samples are interchangeable, so the
    headline tells an unchanged window by identity; 0.0 and -0.0, or an int reading, are not
    interchangeable with 0.0 and a float (they print and sum apart)."""
    t = Settings().rules.gpu_starvation
    last: dict[int, gpu_starvation.TickUtil] = {}

    def tick(samples: tuple[float, ...]) -> gpu_starvation.TickUtil:
        made = gpu_starvation.TickUtil.of(gpu(901, util=samples), t)
        return gpu_starvation._interned(last, 901, made.busy, made.readings, t)

    first = tick((97.0, 96.0, 0.0))
    assert tick((97.0, 96.0, 0.0)) is first
    assert tick((97.0, 96.0, -0.0)) is not first
    assert tick((97, 96.0, 0.0)).readings[0].__class__ is int
    assert tick((97.0, 95.0, 0.0)).readings == (97.0, 95.0, 0.0)


def test_headline_over_unchanged_ticks_is_the_one_worked_out_afresh() -> None:
    """Tick by tick, the headline that reuses a pegged GPU's readings says what a window
    outside any history (computed from scratch) says, while the samples stand still and as
    they start to move."""

    def case(k: int) -> Tick:
        util = (97.0,) * 6 if k < 40 else sawtooth(k)
        return Tick(gpus=(gpu(0, util=util), gpu(1, util=util, pids=(101,))), procs=trainer())

    hist, ctx = History(200), context()
    seen = set()
    for k in range(80):
        hist.append(snapshot(case(k), k))
        kept = classify(hist, ctx)
        seen.add(kept.case)
        fresh = History(200)
        for snap in hist.window(1e9).snapshots:
            fresh.append(snap)
        assert kept == classify(fresh, ctx), k
    assert {Case.LARGE_SIMPLE, Case.SMALL_COMPLEX} <= seen  # judged, not only watching


def test_uneven_ticks_count_idle_at_the_headlines_own_line() -> None:
    """Ticks of one reading and of five (a quiet GPU between its periodic reads) take the
    tick-weighted path; its idle share is counted at the headline's idle line, also where
    that is set apart from gpu-starvation's (the moments kept with each tick are at the
    latter's)."""

    def case(k: int) -> Tick:
        util = (15.0,) if k % 2 else (97.0, 97.0, 15.0, 97.0, 97.0)
        return Tick(gpus=(gpu(0, util=util),), procs=trainer())

    hist = History(200)
    for k in range(40):
        hist.append(snapshot(case(k), k))
    plain = classify(hist, context())
    base = Settings()
    raised = dataclasses.replace(
        base,
        rules=dataclasses.replace(
            base.rules, headline=dataclasses.replace(base.rules.headline, idle_util_pct=20.0)
        ),
    )
    counted_at_20 = classify(hist, context(raised))
    assert plain.gpu_idle_fraction == 0.0  # 15 % is above starvation's and the headline's 10
    # Half the ticks are one reading of 15 (all idle at 20), half hold one of five.
    assert counted_at_20.gpu_idle_fraction == pytest.approx((1.0 + 0.2) / 2, abs=1e-3)
    assert (
        counted_at_20.gpu_util_pct
        == plain.gpu_util_pct
        == pytest.approx((15.0 + 80.6) / 2, abs=0.1)
    )
