"""Short text for the scopes a group of findings covers: ``gpu:0-3,5``."""

from __future__ import annotations

from gputop_doctor.core.findings import Finding


def compress(indices: list[int]) -> str:
    """``[0, 1, 2, 3, 5]`` -> ``0-3,5``."""
    runs: list[str] = []
    values = sorted(set(indices))
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        runs.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(runs)


def scopes_text(group: tuple[Finding, ...]) -> str:
    if len(group) == 1:
        return str(group[0].scope)
    indices = [f.scope.index for f in group if f.scope.index is not None]
    return f"{group[0].scope.kind.value}:{compress(indices)}"
