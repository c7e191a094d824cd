"""One slowdown threshold, named once: the card, the detail chart's line, the thermal finding
and the exporter show the same number (the lower of slowdown and max-operating)."""

from __future__ import annotations

from gputop_doctor.ui.screens.gpu_detail import charts
from gputop_doctor.ui.widgets.gpu_lines import card_lines
from tests.ui.engines import demo_engine, tick


def test_card_chart_and_finding_name_the_same_threshold() -> None:
    engine, clock, _ = demo_engine("thermal")
    frame = tick(engine, clock, 20)
    hot = next(f for f in frame.findings if f.rule_id == "thermal-throttle")
    assert hot.scope.index is not None
    gpu = next(g for g in frame.snapshot.gpus if g.index == hot.scope.index)
    assert gpu.temp_slowdown_c != gpu.temp_max_operating_c  # the demo card has both, apart
    limit = gpu.slowdown_temp_c
    assert limit == min(gpu.temp_slowdown_c or 999, gpu.temp_max_operating_c or 999)
    assert f"slows at {limit:.0f} °C" in hot.title
    evidence = {e.label: e.value for e in hot.evidence}
    assert evidence["slowdown threshold"] == limit
    card = "".join(text for line in card_lines(gpu, None, 60, False) for text, _ in line)
    assert f"/{limit:.0f}°C" in card
    assert f"/{gpu.temp_slowdown_c:.0f}°C" not in card
    chart = charts([], gpu)["temp"]
    assert f"slowdown {limit:.0f}" in chart.title
