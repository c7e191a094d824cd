"""What a frame reuses of the last one (a process row's cells, a GPU card's lines, the tree's
order), and the shortcut from Text to segments of the one-line widgets.

The reuse must never show a stale value: a reused result is always the one a fresh build
would give, and anything the row or the card shows that changed is built again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields, replace

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from gputop_doctor.core.frame import GpuSeries
from gputop_doctor.core.job_identity import JobIdentity
from gputop_doctor.core.model import GpuSample, ProcSample, Runtime, ThreadEnv
from gputop_doctor.core.probe_stats import ProbeStats
from gputop_doctor.ui.text_strips import text_segments, truncate_to_width
from gputop_doctor.ui.widgets.gpu_lines import card_lines
from gputop_doctor.ui.widgets.process_rows import GpuUse, RememberedCells, row_cells, tree_rows

PROC = ProcSample(
    pid=4242,
    ppid=1,
    name="python",
    state="S",
    user="ana",
    cpu_pct=3.0,
    rss_mib=512.0,
    num_threads=4,
    libraries=(Runtime("blas", "OpenBLAS", "/usr/lib/libopenblas.so"),),
)

# A different value for every field of a process but its PID: the test below fails when a
# field is added to ProcSample until it has one here, so a new column cannot be missed.
OTHER_VALUES: dict[str, object] = {
    "ppid": 2,
    "name": "torchrun",
    "state": "R",
    "user": "bob",
    "cpu_pct": 97.0,
    "rss_mib": 2048.0,
    "num_threads": 9,
    "thread_names": (("pt_main_thread", 1),),
    "run_delay_ratio": 0.5,
    "run_ns_per_s": 1e8,
    "wait_ns_per_s": 1e7,
    "hungry_threads": 2,
    "threads_in_d": 1,
    "children_cpu_pct": 5.0,
    "read_mib_s": 1.0,
    "write_mib_s": 2.0,
    "depth": 1,
    "in_tree": False,
    "libraries": (Runtime("blas", "MKL", "/opt/mkl/libmkl_rt.so"),),
    "env": ThreadEnv(omp_num_threads="4"),
    "has_libtorch": True,
    "has_cuda_context": True,
    "probe": ProbeStats(pid=4242, published_at=1.0, steps=10, data_wait_frac=0.42),
    "last_cpu": 3,
    "allowed_cpus": "0-3",
    "job": JobIdentity(slurm_job="48213"),
}


def test_every_field_of_a_process_is_covered() -> None:
    assert set(OTHER_VALUES) == {f.name for f in fields(ProcSample)} - {"pid"}


def test_remembered_cells_are_always_the_fresh_ones() -> None:
    """Whatever field changes, the cells are what row_cells gives; unchanged shown readings
    give back the last frame's very tuple (the table then skips the row)."""
    use = GpuUse((0,), 1000.0, 50.0)
    first = RememberedCells()
    shown = first(PROC, "├─ ", use)
    for name, value in OTHER_VALUES.items():
        changed = replace(PROC, **{name: value})
        cells = RememberedCells(first)(changed, "├─ ", use)
        assert cells == row_cells(changed, "├─ ", use), name
        if cells == shown:
            assert cells is shown, f"{name} does not change the row: its cells are reused"
    moved = RememberedCells(first)(PROC, "└─ ", use)
    assert moved == row_cells(PROC, "└─ ", use)
    assert RememberedCells(first)(PROC, "├─ ", GpuUse((0, 1), 1000.0, 50.0))[3] == "0,1"


def test_remembered_cells_forget_processes_that_left() -> None:
    first = RememberedCells()
    first(PROC, "", None)
    second = RememberedCells(first)  # a frame without the process
    third = RememberedCells(second)
    assert third(PROC, "", None) == row_cells(PROC, "", None)
    assert not second._now  # nothing of the first frame is carried past the next


def test_a_card_line_is_reused_until_what_it_shows_changes() -> None:
    gpu = GpuSample(
        0,
        name="NVIDIA H100 80GB HBM3",
        util_pct=90.0,
        mem_used_mib=60_000.0,
        mem_total_mib=81_000.0,
        temp_c=68.0,
        temp_slowdown_c=87.0,
        power_w=610.0,
        power_limit_w=700.0,
        sm_clock_mhz=1950.0,
        sm_clock_max_mhz=1980.0,
        clock_event_bits=0,
        energy_j=1000.0,
    )
    series = GpuSeries(0, util=(90.0,) * 40, mem_pct=(74.0,) * 50, temp_c=(68.0,) * 50)
    lines = card_lines(gpu, series, 58, selected=False)
    next_tick = replace(gpu, energy_j=1610.0)  # a new sample, the same card
    again = card_lines(next_tick, replace(series, util=tuple(series.util)), 58, selected=False)
    assert all(a is b for a, b in zip(lines, again, strict=True))
    hotter = replace(gpu, temp_c=86.0)
    warm = card_lines(hotter, replace(series, temp_c=(*series.temp_c[1:], 86.0)), 58, False)
    assert warm[2] is not lines[2] and "86/87°C" in "".join(t for t, _ in warm[2])
    assert (
        warm[2]
        == card_lines(hotter, replace(series, temp_c=(*series.temp_c[1:], 86.0)), 58, False)[2]
    )
    assert warm[0] is lines[0] and warm[1] is lines[1] and warm[3] is lines[3]


def test_the_tree_order_of_a_new_frame_holds_that_frames_processes() -> None:
    """The order is remembered by the tree's shape; the rows are the new frame's samples."""
    root = ProcSample(10, ppid=1, depth=0, cpu_pct=1.0)
    kids = [ProcSample(pid, ppid=10, depth=1, cpu_pct=0.0) for pid in (12, 11)]
    outside = ProcSample(99, in_tree=False)
    first = tree_rows([root, *kids, outside])
    busier = [replace(p, cpu_pct=50.0) for p in (root, *kids, outside)]
    second = tree_rows(busier)
    assert [(p.pid, prefix) for p, prefix in second] == [(p.pid, prefix) for p, prefix in first]
    assert [(p.pid, prefix) for p, prefix in second] == [
        (10, ""),
        (11, "├─ "),
        (12, "└─ "),
        (99, ""),
    ]
    assert all(p.cpu_pct == 50.0 for p, _ in second)
    regrouped = tree_rows([busier[0], replace(busier[1], ppid=11, depth=2), busier[2], outside])
    assert [(p.pid, prefix) for p, prefix in regrouped] == [
        (10, ""),
        (11, "└─ "),
        (12, "   └─ "),
        (99, ""),
    ]


def _cells(segments: Iterable[Segment]) -> list[tuple[str, Style | None]]:
    return [(char, segment.style) for segment in segments for char in segment.text]


def test_text_segments_are_what_rich_renders() -> None:
    """The host panel's and verdict bar's shortcut gives Text.render's characters and styles."""
    base = Style(color="white", bgcolor="black")
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append("CPU ", Style(bold=True))
    text.append("▁▂▃█", Style(color="green"))
    text.append(" 63% ")
    text.append("job ", "dim")
    text.append("97%", Style(color="red"))
    text.append(" · iowait 0.0%")
    text.truncate(24, overflow="ellipsis")
    rich = Segment.apply_style(text.render(Console()), base)
    assert _cells(text_segments(text, base)) == _cells(rich)
    assert _cells(text_segments(Text("plain"), base)) == [(c, base) for c in "plain"]


# Lines a one-line widget may be handed: its own dashes and dots, a sparkline, and what a process
# name or a finding may bring (wide characters, combining marks, joiners, tabs).
AWKWARD_LINES = (
    "Bottleneck: both · large model — Both are stressed: GPU 95 % busy, CPU 67 % of the CPUs",
    "CPU ▁▂▃█ 63% of 128  iowait 0.0% │ mem 1.3G/23.5G",
    "train 中文 python ran 12 s",
    "cafe\u0301 ok — a combining mark",
    "flag \U0001f44d\ufe0f and a joiner \U0001f468\u200d\U0001f469 here",
    "a\ttab",
    "",
)


def test_truncate_to_width_cuts_as_rich_does() -> None:
    """The position cut for one-cell lines and Rich's grapheme cut give the same Text, spans
    included (the ellipsis takes the style of the span it falls in), at every width."""
    for line in AWKWARD_LINES:
        for width in range(len(line) + 2):
            for styled_up_to in (0, len(line) // 2, len(line)):
                ours, rich = Text(no_wrap=True), Text(no_wrap=True)
                for text in (ours, rich):
                    text.append(line[:styled_up_to], "bold")
                    text.append(line[styled_up_to:])
                rich.truncate(width, overflow="ellipsis")
                truncate_to_width(ours, width)
                assert (ours.plain, ours.spans) == (rich.plain, rich.spans), (line, width)
