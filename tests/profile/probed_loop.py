"""A training loop under watch(), run as a subprocess by the profile tests.

    python probed_loop.py KIND STEPS
KIND: ``tiny`` (hundreds of small elementwise ops per step), ``big`` (one huge Linear with
odd shapes), ``plain`` (a list of numbers, no torch). Prints ``ready`` once it steps.
"""

from __future__ import annotations

import sys
import time


def main() -> None:
    kind, steps = sys.argv[1], int(sys.argv[2])
    from gputop_doctor.probe import watch

    if kind == "plain":
        for i, _ in enumerate(watch(range(steps))):
            if i == 0:
                print("ready", flush=True)
            time.sleep(0.01)
        return
    import torch

    torch.set_num_threads(1)
    model: torch.nn.Module
    if kind == "big":
        model = torch.nn.Linear(1001, 1999)
        data = [torch.randn(61, 1001) for _ in range(4)]
    else:
        model = torch.nn.Linear(8, 8)
        data = [torch.randn(4, 8) for _ in range(4)]
    batches = (data[i % len(data)] for i in range(steps))
    for i, x in enumerate(watch(batches, model)):
        if i == 0:
            print("ready", flush=True)
        with torch.no_grad():
            y = model(x)
            if kind == "tiny":
                for _ in range(150):  # a loop of tiny elementwise ops: what compile fuses
                    y = y * 1.0001 + 0.0001
            loss = y.square().mean()
        loss.item()  # one host sync per step, as a logging line does
        time.sleep(0.005)


if __name__ == "__main__":
    main()
