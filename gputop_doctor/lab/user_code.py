"""Load the user's ``FILE.py:FUNC`` and call it, turning every failure into one line.

The file runs as a module of its own (its folder first on ``sys.path``, so its local imports
work), registered in ``sys.modules`` under its file name so DataLoader workers started with
``spawn`` or ``forkserver`` can unpickle what it defines.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

from gputop_doctor.lab.machine import LabError


def parse_target(text: str) -> tuple[str, str]:
    """``path/to/file.py:func`` -> (path, func)."""
    path, sep, func = text.rpartition(":")
    if not sep or not path or not func.isidentifier():
        raise LabError(f"expected FILE.py:FUNC, got {text!r}")
    return path, func


def load_function(text: str) -> Callable[..., Any]:
    path, name = parse_target(text)
    if not os.path.isfile(path):
        raise LabError(f"no such file: {path}")
    module_name = os.path.splitext(os.path.basename(path))[0]
    if not module_name.isidentifier():
        module_name = "gputop_doctor_user_code"
    spec = importlib.util.spec_from_file_location(module_name, os.path.abspath(path))
    if spec is None or spec.loader is None:
        raise LabError(f"cannot load {path} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise LabError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    except Exception as exc:
        raise LabError(f"{path} raised {type(exc).__name__} on import: {exc}") from None
    func = getattr(module, name, None)
    if not callable(func):
        raise LabError(f"{path} has no function {name}()")
    return func


def call_user(func: Callable[..., Any], what: str) -> Any:
    try:
        return func()
    except LabError:
        raise
    except Exception as exc:
        raise LabError(f"{what}() raised {type(exc).__name__}: {exc}") from None
