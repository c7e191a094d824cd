"""Workloads for scripts/gpu_check.py, each run as its own process (never imported).

    python workload.py MODE --device cuda|cpu --seconds S --status FILE [--workers N]

MODE:
  gemm          bf16 matrix products back to back (SM and tensor cores busy)
  copy          device-to-device copies of a large buffer by an elementwise kernel
                (memory-bound)
  train-gpu     a GPU-bound bf16 training loop, data made on the device
  train-loader  a small model fed by a DataLoader whose Dataset burns CPU per item, under the
                in-process probe (--workers N: DataLoader num_workers)
  train-creep   a loop that keeps a logged metric as a tensor with its graph (no .item()):
                the GPU memory it holds grows every step
  train-sync    a probed loop of many tiny ops with one .item() per step (host-sync,
                tiny-kernels), to be profiled on demand

The status FILE gets one JSON object, rewritten as the run goes: pid, mode, device,
"first_step" (Unix time of the first timed step, after warm-up), steps, and "error" if the
workload failed. The workload runs until --seconds have passed or it is killed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

STATE: dict = {}


def status(path: str, **changes: object) -> None:
    STATE.update(changes)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(STATE, f)
    os.replace(tmp, path)


def busy(seconds: float) -> None:
    """Burn real CPU (a decode would); a sleep needs none."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def make_busy_dataset(item_cpu_s: float, features: int):
    import torch
    from torch.utils.data import Dataset

    class BusyDataset(Dataset):
        def __len__(self) -> int:
            return 1_000_000

        def __getitem__(self, index: int):
            busy(item_cpu_s)
            return torch.full((features,), float(index % 7)), index % 10

    return BusyDataset()


def sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def run_gemm(args: argparse.Namespace, end: float) -> None:
    import torch

    n = 8192 if args.device == "cuda" else 256
    dtype = torch.bfloat16
    a = torch.randn(n, n, device=args.device, dtype=dtype)
    b = torch.randn(n, n, device=args.device, dtype=dtype)
    c = a @ b
    sync(args.device)
    steps = 0
    status(args.status, first_step=time.time())
    while time.time() < end:
        for _ in range(10):
            c = a @ b
        sync(args.device)
        steps += 10
        if steps % 200 == 0:
            status(args.status, steps=steps)
    del c
    status(args.status, steps=steps)


def run_copy(args: argparse.Namespace, end: float) -> None:
    import torch

    # An elementwise kernel (x * 1 into another buffer) rather than copy_: it reads and writes
    # every byte on the SMs whatever the driver does with a plain memcpy, so utilization counts
    # it, and it is bound by DRAM bandwidth alone.
    n = (1 << 29) if args.device == "cuda" else (1 << 20)  # bf16 elements per buffer (1 GiB)
    src = torch.ones(n, dtype=torch.bfloat16, device=args.device)
    dst = torch.empty_like(src)
    torch.mul(src, 1.0, out=dst)
    sync(args.device)
    steps = 0
    status(args.status, first_step=time.time())
    while time.time() < end:
        for _ in range(20):
            torch.mul(src, 1.0, out=dst)
        sync(args.device)
        steps += 20
        if steps % 400 == 0:
            status(args.status, steps=steps)
    status(args.status, steps=steps)


def mlp(hidden: int, layers: int, inp: int, out: int):
    import torch

    parts = [torch.nn.Linear(inp, hidden), torch.nn.GELU()]
    for _ in range(layers - 1):
        parts += [torch.nn.Linear(hidden, hidden), torch.nn.GELU()]
    parts.append(torch.nn.Linear(hidden, out))
    return torch.nn.Sequential(*parts)


def train_step(model, opt, x, y, device: str) -> object:
    import torch

    with torch.autocast(device_type=device, dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(x).float(), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def run_train_gpu(args: argparse.Namespace, end: float) -> None:
    import torch

    cuda = args.device == "cuda"
    hidden, batch = (8192, 4096) if cuda else (256, 64)
    model = mlp(hidden, 4, hidden, 16).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(batch, hidden, device=args.device)
    y = torch.randint(0, 16, (batch,), device=args.device)
    train_step(model, opt, x, y, args.device)
    sync(args.device)
    status(args.status, first_step=time.time())
    steps = 0
    while time.time() < end:
        train_step(model, opt, x, y, args.device)
        steps += 1
        if steps % 20 == 0:
            sync(args.device)  # bound the queue, as a logging step would
            status(args.status, steps=steps)
    status(args.status, steps=steps)


def run_train_loader(args: argparse.Namespace, end: float) -> None:
    import torch
    from torch.utils.data import DataLoader

    from gputop_doctor.probe import watch

    cuda = args.device == "cuda"
    features, batch = 1024, 32
    item_cpu_s = 0.001 if cuda else 0.002
    model = mlp(4096 if cuda else 128, 2, features, 10).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x0 = torch.randn(batch, features, device=args.device)
    y0 = torch.randint(0, 10, (batch,), device=args.device)
    # The GPU's share of a step: repeat the step until it takes ~10 ms on this device, so
    # that with num_workers=0 (~32 ms of CPU per batch) the GPU waits most of the time, and
    # with enough workers (~3 ms per batch each) it does not.
    repeat = 1
    if cuda:
        for _ in range(3):
            train_step(model, opt, x0, y0, args.device)
        sync(args.device)
        t0 = time.perf_counter()
        for _ in range(10):
            train_step(model, opt, x0, y0, args.device)
        sync(args.device)
        per_step = (time.perf_counter() - t0) / 10
        repeat = max(1, min(200, round(0.010 / max(per_step, 1e-5))))
    loader = DataLoader(
        make_busy_dataset(item_cpu_s, features),
        batch_size=batch,
        num_workers=args.workers,
        pin_memory=cuda,
        persistent_workers=args.workers > 0,
        prefetch_factor=4 if args.workers > 0 else None,
    )
    status(args.status, repeat=repeat, workers=args.workers)
    steps = 0
    for x, y in watch(loader, model):
        if steps == 0:
            status(args.status, first_step=time.time())
        x = x.to(args.device, non_blocking=True)
        y = y.to(args.device, non_blocking=True)
        for _ in range(repeat):
            train_step(model, opt, x, y, args.device)
        sync(args.device)
        steps += 1
        if steps % 20 == 0:
            status(args.status, steps=steps)
        if time.time() >= end:
            break
    status(args.status, steps=steps)


def run_train_creep(args: argparse.Namespace, end: float) -> None:
    import torch

    cuda = args.device == "cuda"
    hidden, batch = (4096, 256) if cuda else (128, 16)
    model = mlp(hidden, 2, hidden, 10).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(batch, hidden, device=args.device)
    y = torch.randint(0, 10, (batch,), device=args.device)
    kept = []  # the bug: a metric kept as a tensor, with its graph, every step
    status(args.status, first_step=time.time())
    steps = 0
    cap = 16 << 30 if cuda else 64 << 20  # stop growing here (bytes), whatever the duration
    grown = 0
    while time.time() < end:
        loss = train_step(model, opt, x, y, args.device)
        if grown < cap:
            h = model[0](x)  # outside no_grad: the graph holds this batch x hidden activation
            kept.append(h.pow(2).mean() + loss)  # would be .item() in a correct loop
            grown += h.numel() * h.element_size() * 2
        steps += 1
        sync(args.device)
        time.sleep(0.02)  # ~30 steps/s: ~4 MiB x 2 kept per step, ~250 MiB/s on a GPU
        if steps % 10 == 0:
            status(args.status, steps=steps, kept=len(kept), grown_mib=grown >> 20)
    status(args.status, steps=steps)


def run_train_sync(args: argparse.Namespace, end: float) -> None:
    import torch

    from gputop_doctor.probe import watch

    model = torch.nn.Linear(64, 64).to(args.device)
    data = [torch.randn(32, 64, device=args.device) for _ in range(4)]

    def batches():
        i = 0
        while time.time() < end:
            yield data[i % len(data)]
            i += 1

    steps = 0
    for x in watch(batches(), model):
        if steps == 0:
            status(args.status, first_step=time.time())
        with torch.no_grad():
            y = model(x)
            for _ in range(150):  # tiny elementwise ops: launch-bound, what compile fuses
                y = y * 1.0001 + 0.0001
            loss = y.square().mean()
        loss.item()  # one host sync per step, as a logging line does
        steps += 1
        if steps % 50 == 0:
            status(args.status, steps=steps)
    status(args.status, steps=steps)


MODES = {
    "gemm": run_gemm,
    "copy": run_copy,
    "train-gpu": run_train_gpu,
    "train-loader": run_train_loader,
    "train-creep": run_train_creep,
    "train-sync": run_train_sync,
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=sorted(MODES))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--status", required=True)
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args()
    start = time.time()
    status(args.status, pid=os.getpid(), mode=args.mode, device=args.device, started=start)
    try:
        import torch

        if args.device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
        torch.manual_seed(0)
        if args.device == "cpu":
            torch.set_num_threads(1)
        MODES[args.mode](args, start + args.seconds)
    except Exception as exc:
        status(args.status, error=f"{type(exc).__name__}: {exc}"[:300])
        print(f"workload {args.mode}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    status(args.status, finished=time.time())
    return 0


if __name__ == "__main__":
    sys.exit(main())
