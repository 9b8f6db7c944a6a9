#!/usr/bin/env python
"""Competitor timing: seconds per DP-SGD epoch of Opacus 1.6.0 on a linear model (CPU).

Standalone (imports nothing from sklearn_fdp); run with ``.venv-opacus/bin/python``:

    .venv-opacus/bin/python benchmarks/baselines/opacus_speed.py \
        --data PATH.npz --mode ghost --batch-size 256 --steps 100 --repeats 5

``PATH.npz`` holds ``X`` (dense, float32) and ``y`` (class indices). The model is
``nn.Linear(d, k)`` with ``CrossEntropyLoss`` (``BCEWithLogitsLoss`` for k = 1),
plain SGD, the data in a ``DataLoader`` made private by
``PrivacyEngine.make_private`` (Poisson sampling, flat clipping at 1, σ = 1) with
``grad_sample_mode`` ``"hooks"`` (Opacus's default) or ``"ghost"`` (ghost
clipping). Each repeat runs ``--steps`` steps of the private loader's loop --
data loading, forward, backward, clipping, noise, update -- after one warm-up
repeat; the per-epoch time is the median seconds per step times the steps of
an epoch (``n / batch``); the same for the process's CPU time (all threads).
Prints one JSON object.
"""

import argparse
import json
import time

import numpy as np
import torch
from opacus import PrivacyEngine
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from _shared import make_private  # this folder


def run(X, y, k, mode, batch_size, steps, seed):
    torch.manual_seed(seed)
    binary = k == 1
    Xt = torch.from_numpy(X)
    yt = torch.from_numpy(y.astype(np.float32 if binary else np.int64))
    loader = DataLoader(TensorDataset(Xt, yt), batch_size=batch_size, num_workers=0)
    model = nn.Linear(X.shape[1], k)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.BCEWithLogitsLoss() if binary else nn.CrossEntropyLoss()
    model, optimizer, criterion, loader = make_private(
        PrivacyEngine(accountant="rdp"), mode, criterion, module=model, optimizer=optimizer,
        data_loader=loader)
    model.train()
    done = 0
    t0, c0 = time.perf_counter(), time.process_time()
    while done < steps:
        for xb, yb in loader:
            optimizer.zero_grad(set_to_none=True)
            out = model(xb)
            loss = criterion(out.squeeze(-1) if binary else out, yb)
            loss.backward()
            optimizer.step()
            done += 1
            if done >= steps:
                break
    return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--mode", choices=["hooks", "ghost"], required=True)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = np.load(args.data)
    X = np.ascontiguousarray(data["X"], dtype=np.float32)
    y = data["y"]
    k = int(data["k"])
    run(X, y, k, args.mode, args.batch_size, min(args.steps, 5), seed=999)  # warm-up
    timed = [run(X, y, k, args.mode, args.batch_size, args.steps, seed=s)
             for s in range(args.repeats)]
    per_step = [wall for wall, _ in timed]
    cpu_per_step = [cpu for _, cpu in timed]
    steps_per_epoch = X.shape[0] / args.batch_size
    print(json.dumps({
        "mode": args.mode, "batch_size": args.batch_size, "steps_timed": args.steps,
        "repeats": args.repeats, "threads": args.threads,
        "seconds_per_step": per_step,
        "seconds_per_epoch": float(np.median(per_step) * steps_per_epoch),
        "cpu_seconds_per_step": cpu_per_step,
        "cpu_seconds_per_epoch": float(np.median(cpu_per_step) * steps_per_epoch),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
