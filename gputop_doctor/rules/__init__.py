"""The rule registry: one module per finding, each a pure function of the history.

Each module exposes ``RULE_ID``, a pure ``check(history, ctx) -> list[Finding]`` and ``RULE``,
its :class:`~gputop_doctor.core.rule.RuleSpec`: the id, the check, the thresholds class, the
after-run advice and what a finding of it costs the GPU. The order below is the order the
engine runs them in (and of the thresholds in ``config.thresholds``); it does not affect what is
shown (the tracker sorts by severity), only which rule warms the shared caches in ``_window``.
"""

from __future__ import annotations

from gputop_doctor.core.rule import RuleSpec
from gputop_doctor.rules import (
    blas_openblas_on_intel,
    comm_bound,
    cpu_contention,
    cpu_saturation,
    data_gap,
    dataloader_config,
    dataparallel,
    ecc_errors,
    gpu_idle_memory,
    gpu_imbalance,
    gpu_lost,
    gpu_memory_creep,
    gpu_starvation,
    gpu_unused,
    gpu_xid,
    host_sync,
    io_bound,
    io_contention,
    memory_growth,
    numa_mismatch,
    nvlink_errors,
    op_dominates,
    openblas_coretype,
    pcie_link_degraded,
    power_cap,
    rank_straggler,
    swap_pressure,
    thermal_throttle,
    thread_oversubscription,
    tiny_kernels,
    waiting_for_rank,
)

RULES: tuple[RuleSpec, ...] = (
    gpu_starvation.RULE,
    cpu_saturation.RULE,
    cpu_contention.RULE,
    thread_oversubscription.RULE,
    blas_openblas_on_intel.RULE,
    openblas_coretype.RULE,
    thermal_throttle.RULE,
    power_cap.RULE,
    gpu_memory_creep.RULE,
    gpu_unused.RULE,
    dataparallel.RULE,
    gpu_imbalance.RULE,
    gpu_idle_memory.RULE,
    io_bound.RULE,
    io_contention.RULE,
    swap_pressure.RULE,
    dataloader_config.RULE,
    op_dominates.RULE,
    tiny_kernels.RULE,
    host_sync.RULE,
    data_gap.RULE,
    memory_growth.RULE,
    gpu_xid.RULE,
    gpu_lost.RULE,
    ecc_errors.RULE,
    pcie_link_degraded.RULE,
    nvlink_errors.RULE,
    comm_bound.RULE,
    rank_straggler.RULE,
    waiting_for_rank.RULE,
    numa_mismatch.RULE,
)

# The rules that judge the probe's on-demand profile window (``gputop-doctor profile``).
PROFILE_RULES = (op_dominates, tiny_kernels, host_sync, data_gap, memory_growth)

SPECS: dict[str, RuleSpec] = {rule.rule_id: rule for rule in RULES}
