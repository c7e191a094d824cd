"""The pure pieces behind the widgets: sparklines, layouts, the process tree, finding groups."""

from __future__ import annotations

from gputop_doctor.core.findings import Finding, Scope, ScopeKind, Severity
from gputop_doctor.core.model import GpuProcess, GpuSample, ProcSample, Snapshot
from gputop_doctor.ui.render import fmt_mib, sparkline
from gputop_doctor.ui.scopes import compress, scopes_text
from gputop_doctor.ui.widgets.findings_list import group_findings
from gputop_doctor.ui.widgets.gpu_lines import CARD_LINES, card_lines, choose_layout, compact_lines
from gputop_doctor.ui.widgets.process_rows import tree_rows
from gputop_doctor.ui.widgets.process_view import TableView, ordered_rows


def test_sparkline_keeps_the_on_off_pattern_and_pads_on_the_left() -> None:
    assert sparkline([0, 100, 0, 100], 6, 0, 100) == "  ▁█▁█"
    assert sparkline(list(range(100)), 3, 0, 100) == "███"  # the newest three
    assert sparkline([50], 0, 0, 100) == ""
    assert sparkline([150, -5], 2, 0, 100) == "█▁"  # clipped, never an IndexError


def test_fmt_mib_is_short() -> None:
    assert fmt_mib(None) == "-"
    assert fmt_mib(812) == "812M"
    assert fmt_mib(60_000) == "58.6G"
    assert fmt_mib(2_000_000) == "1.9T"


def test_eight_gpus_get_cards_at_120x40_and_lines_at_80x24() -> None:
    full = choose_layout(8, 118, 40)
    assert not full.compact and full.columns == 2 and full.lines == 4 * CARD_LINES
    small = choose_layout(8, 78, 24)
    assert small.compact and small.lines == 8
    assert not choose_layout(1, 78, 24).compact  # one GPU still gets its card


def test_card_lines_have_exact_width_and_name_throttling() -> None:
    gpu = GpuSample(
        0,
        name="NVIDIA H100 80GB HBM3",
        util_pct=40.0,
        temp_c=88.0,
        temp_slowdown_c=87.0,
        clock_event_bits=0x20 | 0x40,
        power_w=600.0,
        power_limit_w=700.0,
    )
    lines = card_lines(gpu, None, 58, selected=False)
    assert len(lines) == CARD_LINES
    assert all(sum(len(t) for t, _ in line) == 58 for line in lines)
    title = "".join(t for t, _ in lines[0])
    assert "sw-thermal,hw-thermal" in title
    assert ("sw-thermal,hw-thermal", "hot") in lines[0]
    (line,) = compact_lines((gpu,), {}, 78)
    assert sum(len(t) for t, _ in line) == 78
    assert ("ST HT", "hot") in line  # the one-line row's codes for the same reasons


def test_lost_gpu_says_so() -> None:
    lines = card_lines(GpuSample(3, lost=True), None, 58, selected=False)
    assert "LOST" in "".join(t for t, _ in lines[0])


def test_tree_rows_draw_the_launcher_ranks_and_workers() -> None:
    procs = (
        ProcSample(10, ppid=1, name="torchrun", depth=0),
        ProcSample(12, ppid=10, name="rank1", depth=1),
        ProcSample(11, ppid=10, name="rank0", depth=1),
        ProcSample(20, ppid=11, name="worker", depth=2),
        ProcSample(99, ppid=1, name="other", in_tree=False),
    )
    rows = [(p.pid, prefix + p.name) for p, prefix in tree_rows(procs)]
    assert rows == [
        (10, "torchrun"),
        (11, "├─ rank0"),
        (20, "│  └─ worker"),
        (12, "└─ rank1"),
        (99, "other"),
    ]


def test_ordered_rows_show_gpu_use_and_sort_by_cpu() -> None:
    snap = Snapshot(
        time=0.0,
        tick=0,
        interval_s=1.0,
        gpus=(GpuSample(0, processes=(GpuProcess(11, 0, used_mem_mib=2048, sm_util_pct=70),)),),
        processes=(
            ProcSample(10, ppid=1, name="torchrun", cpu_pct=1.0),
            ProcSample(11, ppid=10, name="rank0", cpu_pct=95.0),
        ),
        target_pid=10,
    )
    rows = dict(ordered_rows(snap, TableView()))
    assert rows[11][3:6] == ("0", "2.0G", "70")
    assert [pid for pid, _ in ordered_rows(snap, TableView("cpu"))] == [11, 10]


def test_findings_on_many_gpus_share_one_line() -> None:
    def finding(index: int, severity: Severity = Severity.WARN) -> Finding:
        return Finding(
            "gpu-starvation", severity, Scope(ScopeKind.GPU, index), f"GPU {index} starved"
        )

    groups = group_findings(
        (finding(0), finding(1), finding(2), finding(5), finding(7, Severity.CRITICAL))
    )
    assert [len(g) for g in groups] == [4, 1]
    assert scopes_text(groups[0]) == "gpu:0-2,5"
    assert compress([3]) == "3"
