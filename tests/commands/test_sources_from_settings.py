"""What a command's sources take from its settings: the NVML source reads each GPU's
utilization samples every tick, after they moved, for as long as the settings' rules look back
over utilization (``Settings.utilization_window_s``), not a fixed 30 s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gputop_doctor.commands.common import EngineOptions, open_run
from gputop_doctor.sources import factory
from gputop_doctor.sources.factory import SourceChoice, open_sources
from gputop_doctor.sources.nvml import source as nvml_source


class Opened(Exception):
    """Raised by the stand-ins once they have seen what they were given."""


def test_a_settings_file_sets_the_window_the_sources_are_opened_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "settings.toml"
    config.write_text("[rules.headline]\nwindow_s = 50\n")
    seen: list[SourceChoice] = []

    def opened(choice: SourceChoice) -> Any:
        seen.append(choice)
        raise Opened

    monkeypatch.setattr(factory, "open_sources", opened)
    options = EngineOptions(demo=None, gpus=8, seed=0, interval_s=1.0, pid=None, config=str(config))
    with pytest.raises(Opened):
        open_run(options)
    assert seen[0].utilization_window_s == 50.0


def test_the_window_reaches_the_nvml_source(monkeypatch: pytest.MonkeyPatch) -> None:
    given: list[dict[str, Any]] = []

    def nvml(**kwargs: Any) -> Any:
        given.append(kwargs)
        raise Opened

    monkeypatch.setattr(nvml_source, "NvmlGpuSource", nvml)
    with pytest.raises(Opened):
        open_sources(SourceChoice(utilization_window_s=45.0))
    with pytest.raises(Opened):
        open_sources(SourceChoice())
    assert given == [{"moved_hold_s": 45.0}, {}]
