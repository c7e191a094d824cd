"""The training jobs the integration tests run in a subprocess (their own PID, their own
imports): a tiny model, a Dataset that sleeps per item when slow, a few dozen steps each.

``python -m tests.integrations.jobs OUT SERVE_URL``: waits for one line on stdin (the test
attaches ``record --pid`` first), then trains a slow run and a fast run with Lightning, logging
into OUT/lightning, and the same with the Hugging Face ``Trainer`` into OUT/hf, each through the
library's own loggers, and prints ``done``. Both trainers run in one process: Lightning's
import (through torchmetrics) already imports transformers, so a second process paid torch,
transformers and TensorBoard again, the costliest part of these tests; each trainer closes its
probe at the end of each run, as it would between two jobs.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

ITEMS = 48
BATCH = 4  # 12 steps per epoch
SLOW_ITEM_S = 0.012  # ~48 ms of data wait per step ...
STEP_WORK_S = 0.02  # ... against ~20 ms of "compute" (a sleep: the GPU's time, not the CPU's)
EVERY_N_STEPS = 6


def _dataset(delay_s: float) -> Any:
    import torch
    from torch.utils.data import Dataset

    class Items(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return ITEMS

        def __getitem__(self, index: int) -> dict[str, Any]:
            if delay_s:
                time.sleep(delay_s)  # a slow read or decode
            return {"x": torch.full((8,), float(index % 5)), "labels": torch.tensor([1.0])}

    return Items()


def _tiny_module() -> Any:
    import torch

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(8, 1)

        def forward(self, x: Any, labels: Any = None) -> dict[str, Any]:
            time.sleep(STEP_WORK_S)
            out = self.layer(x)
            loss = torch.nn.functional.mse_loss(out, labels)
            return {"loss": loss, "logits": out}

    return Tiny()


def lightning_job(out: str, serve_url: str) -> None:
    # MLflow 3 keeps the file store only on request; the test reads its files back.
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    import lightning.pytorch as pl
    import torch
    from lightning.pytorch.loggers import MLFlowLogger, TensorBoardLogger
    from torch.utils.data import DataLoader

    from gputop_doctor.integrations.lightning import DoctorCallback

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = _tiny_module()

        def training_step(self, batch: dict[str, Any], index: int) -> Any:
            return self.net(**batch)["loss"]

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    for name, delay in (("slow", SLOW_ITEM_S), ("fast", 0.0)):
        loggers = [
            TensorBoardLogger(out, name=name, version=0),
            MLFlowLogger(experiment_name=name, tracking_uri=f"file:{out}/mlruns"),
        ]
        trainer = pl.Trainer(
            max_epochs=2,
            accelerator="cpu",
            logger=loggers,
            callbacks=[DoctorCallback(every_n_steps=EVERY_N_STEPS, serve_url=serve_url)],
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            log_every_n_steps=1,
        )
        trainer.fit(Module(), DataLoader(_dataset(delay), batch_size=BATCH))


def hf_job(out: str, serve_url: str) -> None:
    from transformers import Trainer, TrainingArguments

    from gputop_doctor.integrations.hf import add_doctor

    for name, delay in (("slow", SLOW_ITEM_S), ("fast", 0.0)):
        args = TrainingArguments(
            output_dir=f"{out}/{name}",
            report_to=["tensorboard"],
            num_train_epochs=2,
            per_device_train_batch_size=BATCH,
            logging_steps=100,
            save_strategy="no",
            use_cpu=True,
            dataloader_num_workers=0,
            disable_tqdm=True,
        )
        trainer = Trainer(model=_tiny_module(), args=args, train_dataset=_dataset(delay))
        add_doctor(trainer, every_n_steps=EVERY_N_STEPS, serve_url=serve_url)
        trainer.train()


JOBS = {"lightning": lightning_job, "hf": hf_job}  # run in this order, each into OUT/NAME


def main(argv: list[str]) -> None:
    out, serve_url = argv
    import torch

    torch.set_num_threads(1)
    print("ready", flush=True)
    sys.stdin.readline()
    for name, job in JOBS.items():
        job(os.path.join(out, name), serve_url)
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
