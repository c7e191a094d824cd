"""Per-step cost of ``gputop_doctor.probe.watch`` (prints figures; not a test).

Loops over a list of small tuples with and without ``watch()`` and prints the difference per
step in microseconds. The bare loop does nothing per batch, so the figure is the probe's whole
cost: two clock reads, the bookkeeping and the generator hop. The publisher thread writes to
a temporary directory meanwhile, as it would in training (``--interval`` seconds apart).

    .venv/bin/python benchmarks/bench_probe.py [--steps 200000] [--repeats 7]
    .venv/bin/python benchmarks/bench_probe.py --loader   # a real torch DataLoader as well
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def _loop(batches: Iterable[object]) -> float:
    start = time.perf_counter()
    for _batch in batches:
        pass
    return time.perf_counter() - start


def _per_step_us(make: object, steps: int, repeats: int) -> list[float]:
    assert callable(make)
    return [1e6 * _loop(make()) / steps for _ in range(repeats)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--loader", action="store_true", help="also time a torch DataLoader")
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="bench-probe-")
    os.environ["GPUTOP_DOCTOR_PROBE_DIR"] = tmp
    os.environ["GPUTOP_DOCTOR_PROBE_INTERVAL"] = str(args.interval)
    from gputop_doctor.probe import watch

    data = [(i, i) for i in range(args.steps)]
    watched = watch(data)
    bare = _per_step_us(lambda: data, args.steps, args.repeats)
    probed = _per_step_us(lambda: watched, args.steps, args.repeats)
    base, with_probe = min(bare), min(probed)
    print(f"steps per run:        {args.steps} x {args.repeats} runs (best run shown)")
    print(f"bare loop:            {base:.3f} us/step")
    print(f"watch() loop:         {with_probe:.3f} us/step")
    print(f"probe overhead:       {with_probe - base:.3f} us/step (best)")
    spread = statistics.median(probed) - statistics.median(bare)
    print(f"probe overhead:       {spread:.3f} us/step (median)")
    print(f"published files:      {sorted(os.listdir(tmp)) or 'none (loop finished)'}")
    print(f"stats:                {watched.stats()}")

    if args.loader:
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        dataset = TensorDataset(torch.zeros(8_000, 4))
        loader = DataLoader(dataset, batch_size=4, num_workers=0)
        watched_loader = watch(loader)
        steps = len(loader)
        bare, probed = [], []
        for _ in range(max(args.repeats, 25)):  # interleaved, so drift hits both alike
            bare += _per_step_us(lambda: loader, steps, 1)
            probed += _per_step_us(lambda: watched_loader, steps, 1)
        print(f"DataLoader step:      {min(bare):.2f} us bare, {min(probed):.2f} us watched (best)")
        print(f"DataLoader overhead:  {min(probed) - min(bare):.3f} us/step (best)")
        spread = statistics.median(probed) - statistics.median(bare)
        print(f"DataLoader overhead:  {spread:.3f} us/step (median)")


if __name__ == "__main__":
    main()
