"""The host under the GPUs: CPU against the CPUs the job may really use, iowait, memory, swap,
pressure stall information and the attached tree's totals.

It draws its lines as strips (Line API) rather than through ``render``: the generic text path
lays the lines out again on every repaint, which cost more than everything else this panel does.
A new frame repaints only the lines whose text changed, never the border above them: each line
the compositor repaints costs Textual's whole styling pass for it, more than building it.
CPU shows the host-wide figure and, with a PID attached, the job's: the CPUs its tree wants
(used, or on a CPU plus queued) as a share of its *effective* CPUs (affinity and cgroup quota).
A container that may use 8 of 128 cores is saturated at 6 % host CPU, and an idle one on a host
busy with other tenants is not; the job's share is what it feels, so that is what turns hot. It
is ``core.measures.job_cpu_share``, the very measure the cpu-saturation rule judges.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from gputop_doctor.core.frame import Frame
from gputop_doctor.core.measures import job_cpu_share
from gputop_doctor.core.model import HostSample, TreeTotals
from gputop_doctor.core.pressure import Pressure
from gputop_doctor.ui.render import (
    cpu_busy_fraction,
    data_wait_warn_pct,
    fmt_mib,
    fmt_num,
    fmt_rate,
    host_counts_for_job,
    sparkline,
)
from gputop_doctor.ui.text_strips import text_segments, truncate_to_width

COMPACT_HEIGHT = 32  # below this terminal height the panel takes one line


def _eff(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def _psi(label: str, pressure: Pressure | None) -> str:
    return f"{label} {pressure.some_avg10:.0f}%" if pressure is not None else ""


class HostPanel(Widget):
    """One or two lines of host facts, rebuilt only when their text changes."""

    COMPONENT_CLASSES = {  # noqa: RUF012 (Textual reads this class attribute)
        "host-panel--label",
        "host-panel--spark",
        "host-panel--warn",
        "host-panel--hot",
        "host-panel--dim",
    }

    DEFAULT_CSS = """
    HostPanel { height: auto; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._frame: Frame | None = None
        self._line_texts: tuple[Text, ...] = (Text("host: waiting for the first sample"),)
        self._strips: list[Strip | None] = [None]
        self._styles: dict[str, Style] | None = None
        self._base: Style | None = None  # the widget's own style, looked up once per restyle

    @property
    def lines(self) -> tuple[Text, ...]:
        """The lines shown, before they are cut to the panel's width."""
        return self._line_texts

    def show_frame(self, frame: Frame) -> None:
        self._frame = frame
        self._update()

    def on_resize(self) -> None:
        self._strips = [None] * len(self._line_texts)
        self._update()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None
        self._base = None
        self._strips = [None] * len(self._line_texts)

    def _style(self, name: str) -> Style:
        if self._styles is None:
            self._styles = {}
        if name not in self._styles:
            self._styles[name] = self.get_component_rich_style(f"host-panel--{name}")
        return self._styles[name]

    def _update(self) -> None:
        frame = self._frame
        if frame is None or not self.is_attached:
            return
        short = self.app.size.height < COMPACT_HEIGHT
        lines = self._one_line(frame) if short else self._two_lines(frame)
        old = self._line_texts
        if len(lines) != len(old):
            self._line_texts = lines
            self._strips = [None] * len(lines)
            self.refresh(layout=True)
            return
        changed = [
            y
            for y, (new, was) in enumerate(zip(lines, old, strict=True))
            if new.plain != was.plain or new.spans != was.spans
        ]
        self._line_texts = lines
        for y in changed:
            self._strips[y] = None
        if changed:
            self.refresh(*(Region(0, y, self.size.width, 1) for y in changed))

    def _two_lines(self, frame: Frame) -> tuple[Text, Text]:
        """The host's CPU, iowait, load, memory and PSI; below it, the attached tree."""
        host, tree = frame.snapshot.host, frame.snapshot.tree
        label, dim = self._style("label"), self._style("dim")
        share = job_cpu_share(frame.snapshot)
        text = self._cpu_spark(frame, 20 if share is None else 10)
        if share is not None:
            text.append("host ", label)
        self._host_cpu(text, frame)
        if share is None:
            self._of_logical(text, host)
        else:
            text.append(" · ", dim)
            self._job_cpu(text, frame, share)
            effective, logical = host.effective_cpus, host.logical_cpus
            if effective and logical and effective < logical:
                text.append(f" of {_eff(effective)}", dim)  # eff = all: the header's count
        text.append("  iowait ", label)
        text.append(fmt_num(host.iowait_pct, 1, "%"), self._io_style(host.iowait_pct))
        if host.load1 is not None:
            text.append("  load ", label)
            text.append(f"{host.load1:.1f}")
        text.append(" │ ", dim)
        self._memory(text, host, " swap ")
        psi = self._psi_text(host)
        if psi:
            text.append(" │ ", dim)
            text.append("PSI some ", label)
            text.append(psi)
        below = Text(no_wrap=True, overflow="ellipsis")
        below.append(self._tree_text(tree, frame.snapshot.target_pid), dim)
        if tree is not None and tree.steps_per_s is not None:
            below.append(f" · {fmt_rate(tree.steps_per_s)} steps/s", dim)
        if tree is not None and tree.data_wait_pct is not None:
            below.append(" · ", dim)
            wait = tree.data_wait_pct
            below.append(f"data wait {wait:.0f}%", self._wait_style(wait) or dim)
        return text, below

    def _one_line(self, frame: Frame) -> tuple[Text]:
        """A short terminal's line: shorter labels, no load, and the probe's step rate and
        data wait (worth more than PSI) in place of the tree's line."""
        host, tree = frame.snapshot.host, frame.snapshot.tree
        label, dim = self._style("label"), self._style("dim")
        share = job_cpu_share(frame.snapshot)
        text = self._cpu_spark(frame, 10 if share is None else 6)
        self._host_cpu(text, frame)
        if share is None:
            self._of_logical(text, host)
        else:
            text.append(" ", dim)
            self._job_cpu(text, frame, share)
        text.append(" io ", label)
        text.append(fmt_num(host.iowait_pct, 0, "%"), self._io_style(host.iowait_pct))
        text.append(" ", dim)
        self._memory(text, host, " sw ")
        if tree is not None and tree.steps_per_s is not None:
            text.append(" step ", label)
            text.append(f"{fmt_rate(tree.steps_per_s)}/s")
        if tree is not None and tree.data_wait_pct is not None:
            text.append(" wait ", label)
            text.append(f"{tree.data_wait_pct:.0f}%", self._wait_style(tree.data_wait_pct))
        psi = self._psi_text(host)
        if psi:
            text.append(" psi ", label)
            text.append(psi)
        return (text,)

    # -- parts both builders use -----------------------------------------------------------

    def _cpu_spark(self, frame: Frame, width: int) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("CPU ", self._style("label"))
        text.append(sparkline(frame.cpu_series, width, 0.0, 100.0), self._style("spark"))
        text.append(" ")
        return text

    def _host_cpu(self, text: Text, frame: Frame) -> None:
        # Host-wide CPU % is of all logical CPUs; it is the job's load only when the job may
        # use every CPU (or none is attached). Under a smaller quota the job's own share of its
        # effective CPUs is what saturates, as the cpu-saturation rule judges it.
        host = frame.snapshot.host
        host_hot = host_counts_for_job(frame.snapshot) and (host.cpu_pct or 0.0) >= (
            cpu_busy_fraction(frame) * 100.0
        )
        text.append(fmt_num(host.cpu_pct, 0, "%"), self._style("hot") if host_hot else Style())

    def _of_logical(self, text: Text, host: HostSample) -> None:
        if host.logical_cpus:
            text.append(f" of {host.logical_cpus}", self._style("dim"))

    def _job_cpu(self, text: Text, frame: Frame, share: float) -> None:
        hot = self._style("hot") if share >= cpu_busy_fraction(frame) else Style()
        text.append("job ", self._style("label"))
        text.append(f"{share * 100:.0f}%", hot)

    def _memory(self, text: Text, host: HostSample, swap_label: str) -> None:
        label = self._style("label")
        text.append("mem ", label)
        text.append(self._used_of(host.mem_used_mib, host.mem_total_mib))
        text.append(swap_label, label)
        if host.swap_total_mib == 0:
            text.append("none", self._style("dim"))
        else:
            swap = self._used_of(host.swap_used_mib, host.swap_total_mib)
            text.append(swap, self._swap_style(host))

    @staticmethod
    def _used_of(used: float | None, total: float | None) -> str:
        if used is None and total is None:
            return "-"
        return f"{fmt_mib(used)}/{fmt_mib(total)}"

    def _io_style(self, iowait: float | None) -> Style:
        if iowait is None or iowait < 5:
            return Style()
        return self._style("hot" if iowait >= 20 else "warn")

    def _wait_style(self, wait_pct: float) -> Style:
        """The probe's data wait: warning from the share the starvation rule takes as proof."""
        frame = self._frame
        warn_pct = data_wait_warn_pct(frame) if frame is not None else None
        return self._style("warn") if warn_pct is not None and wait_pct >= warn_pct else Style()

    def _swap_style(self, host: HostSample) -> Style:
        moving = (host.swap_in_mib_s or 0.0) + (host.swap_out_mib_s or 0.0)
        return self._style("warn") if moving > 1.0 else Style()

    @staticmethod
    def _psi_text(host: HostSample) -> str:
        parts = [
            _psi("cpu", host.psi_cpu),
            _psi("io", host.psi_io),
            _psi("mem", host.psi_memory),
        ]
        return " ".join(p for p in parts if p)

    @staticmethod
    def _tree_text(tree: TreeTotals | None, target: int | None) -> str:
        if target is None:
            return "no process attached (a: attach to a PID)"
        if tree is None:
            return f"PID {target}: no processes left"
        return (
            f"attached tree: {tree.processes} processes · {tree.threads} threads · "
            f"{tree.cpu_pct:.0f}% CPU · {fmt_mib(tree.rss_mib)} RSS"
        )

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._line_texts)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y >= len(self._strips):
            return Strip.blank(width, self.rich_style)
        strip = self._strips[y]
        if strip is None:
            if self._base is None:
                self._base = self.rich_style
            base = self._base
            line = self._line_texts[y].copy()  # kept whole: a wider panel shows more of it
            truncate_to_width(line, width)
            strip = Strip(text_segments(line, base)).adjust_cell_length(width, base)
            self._strips[y] = strip
        return strip
