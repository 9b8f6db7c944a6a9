#!/usr/bin/env python
"""Competitor timing: seconds per DP-SGD epoch of Opacus 1.6.0 on an MLP (CPU).

Standalone (imports nothing from sklearn_fdp); run with ``.venv-opacus/bin/python``:

    .venv-opacus/bin/python benchmarks/baselines/opacus_mlp_speed.py \
        --data PATH.npz --hidden 300 --mode hooks --batch-size 1000 --steps 20 --repeats 3

``PATH.npz`` holds ``X`` (dense, float32), ``y`` (class indices) and ``k`` (number of
classes). The model is ``Linear(d, h) → ReLU → Linear(h, k)`` (``--hidden`` may list
several widths, comma-separated) with ``CrossEntropyLoss``, SGD with momentum 0.9, the
data in a ``DataLoader`` made private by ``PrivacyEngine.make_private`` (Poisson
sampling, flat clipping at 1, σ = 1) with ``grad_sample_mode`` ``"hooks"`` (Opacus's
default), ``"ghost"`` (ghost clipping) or ``"functorch"``. Each repeat runs ``--steps``
steps of the private loader's loop -- data loading, forward, backward, clipping, noise,
update -- after one warm-up run; the per-epoch time is the median seconds per step
times the steps of an epoch (``n / batch``). Prints one JSON object. Same protocol as
``opacus_speed.py`` (the linear model).
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


def make_mlp(d, hidden, k):
    sizes = [d, *hidden, k]
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def run(X, y, k, hidden, mode, batch_size, steps, seed):
    torch.manual_seed(seed)
    Xt = torch.from_numpy(X)
    yt = torch.from_numpy(y.astype(np.int64))
    loader = DataLoader(TensorDataset(Xt, yt), batch_size=batch_size, num_workers=0)
    model = make_mlp(X.shape[1], hidden, k)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    model, optimizer, criterion, loader = make_private(
        PrivacyEngine(accountant="rdp"), mode, criterion, module=model, optimizer=optimizer,
        data_loader=loader)
    model.train()
    done = 0
    t0 = time.perf_counter()
    while done < steps:
        for xb, yb in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            done += 1
            if done >= steps:
                break
    return (time.perf_counter() - t0) / steps


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--hidden", default="300")
    p.add_argument("--mode", choices=["hooks", "ghost", "functorch"], required=True)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    hidden = [int(h) for h in args.hidden.split(",") if h]
    data = np.load(args.data)
    X = np.ascontiguousarray(data["X"], dtype=np.float32)
    y = data["y"]
    k = int(data["k"])
    run(X, y, k, hidden, args.mode, args.batch_size, min(args.steps, 3), seed=999)  # warm-up
    per_step = [run(X, y, k, hidden, args.mode, args.batch_size, args.steps, seed=s)
                for s in range(args.repeats)]
    steps_per_epoch = X.shape[0] / args.batch_size
    print(json.dumps({
        "mode": args.mode, "hidden": hidden, "batch_size": args.batch_size,
        "steps_timed": args.steps, "repeats": args.repeats, "threads": args.threads,
        "seconds_per_step": per_step,
        "seconds_per_epoch": float(np.median(per_step) * steps_per_epoch),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
