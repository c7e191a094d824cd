"""The collector pacing of the long runs (TUI, record, serve): set while they run, the
process's own thresholds after."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from gputop_doctor.cli import main
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.gc_pacing import YOUNG_THRESHOLD, paced_collector


def test_young_threshold_is_raised_inside_and_restored_after() -> None:
    before = gc.get_threshold()
    with paced_collector():
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *before[1:])
    assert gc.get_threshold() == before


@pytest.mark.parametrize("young", [0, 50_000])
def test_a_process_choice_of_off_or_higher_is_kept(young: int) -> None:
    """Automatic collection turned off (0), or a higher threshold than the pacing's, is
    what the process chose: the pacing only ever raises the threshold."""
    before = gc.get_threshold()
    gc.set_threshold(young, *before[1:])
    try:
        with paced_collector():
            assert gc.get_threshold()[0] == young
        assert gc.get_threshold()[0] == young
    finally:
        gc.set_threshold(*before)


def test_thresholds_are_restored_when_the_app_fails() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), paced_collector():
        raise RuntimeError("the app failed")
    assert gc.get_threshold() == before


def test_an_object_that_lives_one_frame_is_not_promoted() -> None:
    """What the pacing is for: a frame's worth of new objects (far fewer than the threshold),
    kept across a frame and dropped, never reaches a young collection, so nothing of it is
    promoted to the generation whose growth brings on full collections."""
    gc.collect()
    with paced_collector():
        collections_before = gc.get_stats()[0]["collections"]
        frame = [[i] for i in range(2_000)]  # about what a frame keeps: lines, strips, caches
        del frame
        assert gc.get_stats()[0]["collections"] == collections_before


@pytest.mark.parametrize(
    "command",
    [
        ["record", "--demo", "healthy", "--quiet", "--csv"],
        ["serve", "--demo", "healthy", "--stdout-json", "--textfile"],
    ],
)
def test_record_and_serve_tick_with_the_collector_paced(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The headless runs tick under the pacing (a training job whose processes all run made
    a young collection every third tick), and hand the process its thresholds back."""
    seen: list[int] = []

    def run(engine: Engine, *args: object, **kwargs: object) -> int:
        seen.append(gc.get_threshold()[0])
        return 0

    monkeypatch.setattr(Engine, "run", run)
    before = gc.get_threshold()
    gc.set_threshold(700, *before[1:])  # Python's default
    try:
        target = str(tmp_path / ("session.csv" if command[0] == "record" else ""))
        assert main([*command, target, "--duration", "1"]) == 0
        assert seen == [YOUNG_THRESHOLD]
        assert gc.get_threshold() == (700, *before[1:])
    finally:
        gc.set_threshold(*before)
