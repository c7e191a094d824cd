"""Read settings and rule thresholds from a TOML file.

The keys are the ones each ``rules/pages/<id>.md`` lists, so what the docs say can be changed,
can be: ``hold_s = 5`` at the top, ``[rules.gpu_starvation]`` with ``mean_util_pct = 60``.
An unknown key or a value of the wrong type is an error naming the key, never silently ignored:
a typo in a threshold must not leave the default quietly in force.
"""

from __future__ import annotations

import dataclasses
import math
import os
import stat
import sys
from collections.abc import Mapping
from typing import IO, Any, Protocol

from gputop_doctor.config import Settings, environment
from gputop_doctor.core.errors import UsageError

# tomllib is tomli adopted into the standard library in 3.11: the same API, so 3.10 reads the
# same files with the same results. Checked both ways by mypy (also run with 3.10 in .ci/run).
if sys.version_info >= (3, 11):
    import tomllib as toml_module
else:
    import tomli as toml_module

# Engine settings a file may change; the rest (interval, pace) belong to the command line.
FILE_SETTINGS = (
    "history_s",
    "process_history_s",
    "full_history_s",
    "process_window_s",
    "hold_s",
    "clear_s",
    "series_len",
    "readonly",
)


MAX_FILE_BYTES = 1024 * 1024
MAX_SECONDS = 7 * 24 * 3600.0  # a window or hold longer than a week is a typo
MAX_COUNT = 1_000_000  # points, samples, threads, GPUs
MAX_NUMBER = 1e9  # anything else (a CPU % of a many-threaded process can pass 100)
SHARES = frozenset({"delay_ratio", "critical_delay_ratio", "max_clock_ratio", "power_ratio"})
# 0 would keep nothing
POSITIVE = frozenset(
    {"history_s", "process_history_s", "full_history_s", "process_window_s", "series_len"}
)


class SettingsError(UsageError):
    """A settings file we cannot use; the message is one line for the user."""


class TomlReader(Protocol):
    """What the loader uses of ``tomllib`` or ``tomli``; a seam so tests can run either one."""

    @property
    def TOMLDecodeError(self) -> type[ValueError]: ...

    def load(self, fp: IO[bytes], /) -> dict[str, Any]: ...


def default_path() -> str | None:
    """``$GPUTOP_DOCTOR_CONFIG``, else ``$XDG_CONFIG_HOME/gputop-doctor/config.toml`` if present."""
    explicit = environment.config_file()
    if explicit:
        return explicit
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    path = os.path.join(base, "gputop-doctor", "config.toml")
    return path if os.path.exists(path) else None


def load_settings(path: str, base: Settings, *, toml: TomlReader = toml_module) -> Settings:
    """``base`` with the file's values applied; ``toml`` is the standard one for this Python."""
    try:
        # O_NONBLOCK: a FIFO given as the settings file must not hang the command.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
                raise SettingsError(
                    f"cannot read settings {path}: not a regular file of at most 1 MiB"
                )
            data = toml.load(handle)
    except OSError as exc:
        raise SettingsError(f"cannot read settings {path}: {exc.strerror or exc}") from None
    except RecursionError:
        raise SettingsError(f"{path} is not valid TOML: nested too deeply") from None
    except ValueError as exc:  # TOMLDecodeError, or bytes that are not UTF-8
        message = " ".join(str(exc).split())  # one line
        raise SettingsError(f"{path} is not valid TOML: {message}") from None
    return apply(base, data, path)


def apply(base: Settings, data: Mapping[str, Any], path: str = "settings") -> Settings:
    changes: dict[str, Any] = {}
    for key, value in data.items():
        if key == "rules":
            changes["rules"] = _apply_rules(base, value, path)
        elif key in FILE_SETTINGS:
            where = f"{path}: {key}"
            changes[key] = _checked(key, _coerce(getattr(base, key), value, where), where)
        else:
            raise SettingsError(f"{path}: unknown setting {key!r}")
    return dataclasses.replace(base, **changes)


def _apply_rules(base: Settings, tables: Any, path: str) -> Any:
    if not isinstance(tables, Mapping):
        raise SettingsError(f"{path}: 'rules' must be a table of [rules.<rule>] tables")
    rules = base.rules
    for name, table in tables.items():
        attr = name.replace("-", "_")
        if not hasattr(rules, attr):
            raise SettingsError(f"{path}: unknown rule {name!r} in [rules]")
        if not isinstance(table, Mapping):
            raise SettingsError(f"{path}: rules.{name} must be a table")
        current = getattr(rules, attr)
        updates = {}
        for key, value in table.items():
            if key not in {f.name for f in dataclasses.fields(current)}:
                raise SettingsError(f"{path}: unknown threshold rules.{attr}.{key}")
            where = f"{path}: rules.{attr}.{key}"
            updates[key] = _checked(key, _coerce(getattr(current, key), value, where), where)
        rules = dataclasses.replace(rules, **{attr: dataclasses.replace(current, **updates)})
    return rules


def _coerce(default: Any, value: Any, where: str) -> Any:
    """The file's value in the default's type: an int may stand for a float, nothing else."""
    if isinstance(default, bool) or isinstance(value, bool):
        if isinstance(default, bool) and isinstance(value, bool):
            return value
    elif isinstance(default, float) and isinstance(value, (int, float)):
        return float(value)
    elif type(default) is type(value) or (default is None and isinstance(value, (int, float))):
        return value
    raise SettingsError(f"{where} must be {type(default).__name__}, not {value!r}")


def _limit(key: str) -> float:
    """The largest sensible value for a setting, from what its name says it measures."""
    if key.endswith("_fraction") or key in SHARES:
        return 1.0
    if key.endswith("_pct") and not ("cpu" in key or "busy" in key):
        return 100.0
    if key.endswith("_s"):
        return MAX_SECONDS
    return MAX_NUMBER


def _checked(key: str, value: Any, where: str) -> Any:
    """``value`` if it is in range for ``key``; else a one-line error naming the key."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise SettingsError(f"{where} must be a finite number, not {value!r}")
    if key in POSITIVE and value <= 0:
        raise SettingsError(f"{where} must be greater than 0, not {value!r}")
    if value < 0:
        raise SettingsError(f"{where} must not be negative, not {value!r}")
    limit = MAX_COUNT if isinstance(value, int) else _limit(key)
    if value > limit:
        raise SettingsError(f"{where} must be at most {limit:g}, not {value!r}")
    return value
