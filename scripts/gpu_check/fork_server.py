"""The dry run's fork server: torch imported once, each torch program a fork of it.

    python fork_server.py    (started by scripts/gpu_check.py --dry-run, never by hand)

On a CPU the GPU check's dry run starts eight torch programs (the workloads, sweep, lab), and
importing torch costs about 3 CPU-seconds each time: most of the dry run's cost on a 2-core CI
machine. This server imports torch once and forks one process per program. The fork makes
itself that program: its own session, argv, environment, working directory, standard output
and error, then the script or module runs as ``__main__``, exits with its own status, and is
signalled, waited for and logged exactly as a fresh interpreter would be. Only the start-up is
shared. On a GPU the harness never uses this: there each program's start-up is part of what is
measured, and a process that touched CUDA must not fork.

Each fork is started through a short-lived middle process, so that it is orphaned at once and
adopted by the harness (a child subreaper, ``PR_SET_CHILD_SUBREAPER``): the harness waits for
it and reads its exit status as for any child of its own.

Protocol, one JSON object per line: the server first writes ``{"torch": {...}}`` (what the
environment step reports of torch); then for each request on standard input, ``{"script":
PATH}`` or ``{"module": NAME}`` with ``args``, ``cwd``, ``env``, ``stdout`` and ``stderr``
(file paths; the same path for both joins them), it answers ``{"pid": N}`` once the process is
the harness's. End of input ends the server.
"""

from __future__ import annotations

import json
import os
import random
import runpy
import sys
from typing import Any


def torch_facts() -> dict[str, Any]:
    """What a fresh ``import torch`` says (the harness's environment step reports it)."""
    import torch

    available = torch.cuda.is_available()
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "available": available,
        "device": torch.cuda.get_device_name(0) if available else None,
        "compile": hasattr(torch, "compile"),
    }


def answer(message: dict[str, Any]) -> None:
    os.write(1, (json.dumps(message) + "\n").encode())


def serve() -> dict[str, Any] | None:
    """Answer requests until the input ends (None), or, in a fork, return the request to run."""
    answer({"torch": torch_facts()})
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if fork_adopted():
            return request
    return None


def fork_adopted() -> bool:
    """Fork a grandchild and answer its PID once its parent is gone: True in the grandchild."""
    read_end, write_end = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(read_end)
        pid = os.fork()
        if pid == 0:
            os.close(write_end)
            return True
        os.write(write_end, str(pid).encode())
        os._exit(0)
    os.close(write_end)
    os.waitpid(middle, 0)  # the grandchild is orphaned now: the subreaper's child
    with os.fdopen(read_end, "rb") as pipe:
        pid = int(pipe.read() or b"0")
    answer({"pid": pid} if pid else {"error": "the middle process could not fork"})
    return False


def become(request: dict[str, Any]) -> None:
    """Take on the requested program's session, files, place and environment, then run it."""
    os.setsid()
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    os.dup2(os.open(request["stdout"], flags, 0o644), 1)
    if request["stderr"] == request["stdout"]:
        os.dup2(1, 2)
    else:
        os.dup2(os.open(request["stderr"], flags, 0o644), 2)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    random.seed()  # a fresh interpreter seeds from the OS; every fork would repeat one state
    if "module" in request:
        sys.argv = [request["module"], *request["args"]]
        sys.path[0] = os.getcwd()  # as ``python -m`` puts it
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    else:
        sys.argv = [request["script"], *request["args"]]
        sys.path[0] = os.path.dirname(os.path.abspath(request["script"]))
        runpy.run_path(request["script"], run_name="__main__")


if __name__ == "__main__":
    todo = serve()
    if todo is not None:
        become(todo)
