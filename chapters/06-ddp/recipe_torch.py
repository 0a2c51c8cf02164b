#!/usr/bin/python3
"""recipe_torch.py: chapter 6's default training recipe, run by PyTorch
(Debian's python3-torch, 1.13, CPU), printing the test accuracy after every
epoch. It is the peer of chapter 6's accuracy target: the model,
initialisation, sampler, optimizer and schedule of lib/ddp, on real
Fashion-MNIST, so that a C run's curve can be set beside torch's.

    recipe_torch.py [--world=W] [--seed=S] [--epochs=N] [--batch=B] ...

--batch is the per-rank batch; the global batch is W x B. With --world=W the
W ranks of DistributedDataParallel are simulated in one process, step by
step: rank r's batch is what DistributedSampler(num_replicas=W, rank=r) and
a DataLoader of batch B hand it, its gradient is the mean over its own batch,
and the W gradients are summed and divided by W (as lib/ddp/reducer.c
averages: after the sum) before one optimizer step. The union of the W
batches is exactly the batch one process of batch W x B takes, so W only
changes the rounding of the gradient, not its maths.

What is modelled as in the C code (lib/ddp/model.h, optim.h):
- the MLP fc1..fcL (784-256-128-10), nn.Linear's initialisation from
  torch.manual_seed(seed), inputs bytes / 255, mean softmax cross-entropy;
- SGD with momentum (the buffer starts as the first gradient) or Adam, by
  torch.optim; weight decay in the optimizer;
- the schedule per optimizer step, in the closed forms of optim.h: constant,
  cosine lr (1 + cos(pi t / T)) / 2 with T the steps of the whole run, step
  lr gamma^floor(t / step_size);
- the sampler: randperm from a generator seeded seed + epoch, rank r takes
  every W-th index from r (DistributedSampler, shuffle on, no padding is
  needed at 60000 samples and W = 1, 2, 4, 8), batches of B, the last one
  short unless --drop-last;
- --hflip=P: a horizontal flip of each training image with probability P
  (torchvision's RandomHorizontalFlip). The C loader decides each flip from a
  per-sample seed (lib/loader/augment.h), so the two draw different flips of
  the same probability: curves agree in distribution, not sample for sample.

The recipe (this script's defaults, chapter 6's default run): Adam with
torch's defaults (lr 1e-3, betas 0.9 and 0.999, eps 1e-8, no weight
decay), a cosine schedule over every step of the run and no warmup, a
global batch of 128, 20 epochs, no augmentation, drop_last off. Measured with torch 1.13 here,
it ends at 0.897 to 0.899 on seeds 0, 1, 2, and W = 2, 4, 8 end within 0.31
points of W = 1. SGD (momentum 0.9, lr 0.05, the same schedule) ends as
high, but its early epochs swing more from one rounding to another.

The data: the IDX files of Debian's dataset-fashion-mnist
(/usr/share/datasets/fashion-mnist, gzipped), or --data=DIR. Set
OPENBLAS_NUM_THREADS=1 (and OPENBLAS_CORETYPE=SkylakeX on a recent Xeon,
where OpenBLAS 0.3.21 otherwise picks its slow SSE3 kernels); torch itself
is told to use one thread.
"""
import argparse
import gzip
import math
import struct
import sys
import time
from pathlib import Path

import torch

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
SPLIT_TOLERANCE = 1e-5  # measured: 6.4e-7 at most, a few float32 roundings of the sums


def read_idx(path):
    """An IDX file (gzipped or not) as a uint8 tensor of its shape."""
    try:
        raw = Path(path).read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError) as e:
        sys.exit(f"{path}: {e}")
    if len(raw) < 4:
        sys.exit(f"{path}: not an IDX file (too short)")
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08:
        sys.exit(f"{path}: not an IDX file of unsigned bytes")
    if ndim == 0 or len(raw) < 4 + 4 * ndim:
        sys.exit(f"{path}: not an IDX file (bad header)")
    shape = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
    body = raw[4 + 4 * ndim:]
    if len(body) != math.prod(shape):
        sys.exit(f"{path}: {len(body)} bytes of data, the header says {math.prod(shape)}")
    return torch.frombuffer(bytearray(body), dtype=torch.uint8).reshape(shape)


def load_split(data, prefix):
    d = Path(data)
    pick = lambda stem: d / stem if (d / stem).exists() else d / (stem + ".gz")
    images = read_idx(pick(f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(pick(f"{prefix}-labels-idx1-ubyte"))
    if images.dim() != 3 or labels.dim() != 1 or images.shape[0] != labels.shape[0]:
        sys.exit(f"{d}: {prefix} images {tuple(images.shape)} and labels {tuple(labels.shape)} do not match")
    if labels.max() > 9:
        sys.exit(f"{d}: {prefix} labels go up to {labels.max()}, Fashion-MNIST has 10 classes")
    return images.reshape(images.shape[0], -1), labels.long()


def build_model(sizes, seed):
    """fc1, fc2, ... as lib/ddp/model.h names them; ReLU between."""
    torch.manual_seed(seed)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def lr_at(args, t, total):
    if args.schedule == "cosine":
        return args.lr * (1 + math.cos(math.pi * t / total)) / 2
    if args.schedule == "step":
        return args.lr * args.gamma ** (t // args.step_size)
    return args.lr


def rank_batches(n, world, batch, seed, epoch, drop_last):
    """Per step, the list of the W ranks' index batches (DistributedSampler +
    DataLoader). n is a multiple of W here, so no rank is padded."""
    g = torch.Generator()
    g.manual_seed(seed + epoch)
    perm = torch.randperm(n, generator=g)
    shards = [perm[r::world] for r in range(world)]
    per_rank = n // world
    steps = per_rank // batch if drop_last else -(-per_rank // batch)
    return [[s[k * batch:(k + 1) * batch] for s in shards] for k in range(steps)]


@torch.no_grad()
def accuracy(model, x, y):
    model.eval()
    correct = 0
    for i in range(0, x.shape[0], 1000):
        correct += (model(x[i:i + 1000].float().div(255)).argmax(1) == y[i:i + 1000]).sum().item()
    model.train()
    return correct / x.shape[0]


def check_split(args, xtr, ytr, sizes, global_batch):
    """--check-split: for the first batches of epoch 0, the union of the W
    ranks' batches must be the global batch, and the averaged W-rank gradient
    must equal the global-batch gradient up to float32 rounding. Prints the
    largest difference relative to each tensor's largest element, and fails
    above SPLIT_TOLERANCE."""
    model = build_model(sizes, args.seed)
    n = xtr.shape[0]

    def gradient(batches):
        model.zero_grad(set_to_none=False)
        for idx in batches:
            torch.nn.functional.cross_entropy(model(xtr[idx]), ytr[idx]).backward()
        return [q.grad.detach().clone().div_(len(batches)) for q in model.parameters()]

    print("world  batch  largest relative gradient difference against world 1 (first 5 steps)")
    one = rank_batches(n, 1, global_batch, args.seed, 0, args.drop_last)[:5]
    reference = [gradient(b) for b in one]
    for world in (2, 4, 8):
        split = rank_batches(n, world, global_batch // world, args.seed, 0, args.drop_last)[:5]
        worst = 0.0
        for ref, ranks, whole in zip(reference, split, one):
            if sorted(torch.cat(ranks).tolist()) != sorted(whole[0].tolist()):
                sys.exit(f"world {world}: the ranks' batches are not the global batch")
            for a, b in zip(gradient(ranks), ref):
                worst = max(worst, ((a - b).abs().max() / b.abs().max()).item())
        print(f"{world:5d}  {global_batch // world:5d}  {worst:.2e}")
        if worst > SPLIT_TOLERANCE:
            sys.exit(f"world {world}: the averaged gradient is {worst:.2e} away from the global batch's "
                     f"(more than float32 rounding, {SPLIT_TOLERANCE:g})")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=DEFAULT_DATA, help="folder of the IDX files (default %(default)s)")
    p.add_argument("--hidden", default="256,128", help="hidden widths (default %(default)s)")
    p.add_argument("--world", type=int, default=1, help="simulated ranks W (default 1)")
    p.add_argument("--batch", type=int, default=None, help="per-rank batch (default 128 / W)")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--optimizer", choices=["sgd", "adam"], default="adam")
    p.add_argument("--lr", type=float, default=None, help="default 0.001 (adam), 0.05 (sgd)")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--nesterov", action="store_true")
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--schedule", choices=["constant", "cosine", "step"], default="cosine")
    p.add_argument("--step-size", type=int, default=0, help="step schedule: steps between decays")
    p.add_argument("--gamma", type=float, default=0.1, help="step schedule: decay factor")
    p.add_argument("--hflip", type=float, default=0.0, help="flip probability (default 0: none)")
    p.add_argument("--drop-last", action="store_true")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--check-split", action="store_true",
                   help="compare the W = 2, 4, 8 gradients with the global batch's, then exit")
    args = p.parse_args()
    if args.batch is None:
        args.batch = max(1, 128 // args.world)
    if args.lr is None:
        args.lr = 0.05 if args.optimizer == "sgd" else 0.001
    if args.schedule == "step" and args.step_size <= 0:
        p.error("--schedule=step needs --step-size > 0")
    for flag, value, low in (("--world", args.world, 1), ("--batch", args.batch, 1),
                             ("--epochs", args.epochs, 1), ("--threads", args.threads, 1)):
        if value < low:
            p.error(f"{flag}={value}: must be at least {low}")
    if not (args.lr > 0 and math.isfinite(args.lr)) or not 0 <= args.hflip <= 1:
        p.error("--lr must be positive and finite, --hflip in [0, 1]")
    torch.set_num_threads(args.threads)

    xtr, ytr = load_split(args.data, "train")
    xte, yte = load_split(args.data, "t10k")
    xtr = xtr.float().div(255)
    n = xtr.shape[0]
    if n % args.world:
        sys.exit(f"--world={args.world}: {n} samples do not split evenly (this script does not pad)")
    try:
        sizes = [xtr.shape[1]] + [int(h) for h in args.hidden.split(",")] + [10]
    except ValueError:
        p.error(f"--hidden={args.hidden}: a comma-separated list of widths")
    if min(sizes) < 1:
        p.error(f"--hidden={args.hidden}: every width must be at least 1")
    side = math.isqrt(sizes[0])
    if args.hflip > 0 and side * side != sizes[0]:
        sys.exit(f"--hflip: images of {sizes[0]} pixels are not square")
    if args.check_split:
        check_split(args, xtr, ytr, sizes, args.world * args.batch)
        return
    model = build_model(sizes, args.seed)
    if args.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                              nesterov=args.nesterov, weight_decay=args.weight_decay)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    per_rank = n // args.world
    steps_per_epoch = per_rank // args.batch if args.drop_last else -(-per_rank // args.batch)
    total = steps_per_epoch * args.epochs
    flipgen = torch.Generator()
    flipgen.manual_seed(args.seed + 1_000_003)
    flip_order = torch.arange(side - 1, -1, -1)

    print(f"# sizes {'-'.join(map(str, sizes))} world {args.world} batch {args.batch} "
          f"(global {args.world * args.batch}) {args.optimizer} lr {args.lr} momentum {args.momentum} "
          f"wd {args.weight_decay} schedule {args.schedule} hflip {args.hflip} epochs {args.epochs} "
          f"seed {args.seed} steps/epoch {steps_per_epoch}")
    print("epoch  train_loss  test_acc  seconds")
    t = 0
    for epoch in range(args.epochs):
        start = time.perf_counter()
        loss_sum, seen = 0.0, 0
        for batches in rank_batches(n, args.world, args.batch, args.seed, epoch, args.drop_last):
            for group in opt.param_groups:
                group["lr"] = lr_at(args, t, total)
            opt.zero_grad(set_to_none=False)
            for idx in batches:
                x = xtr[idx]
                if args.hflip > 0:
                    flip = torch.rand(len(idx), generator=flipgen) < args.hflip
                    if flip.any():
                        x = x.clone()
                        x[flip] = x[flip].view(-1, side, side)[:, :, flip_order].reshape(-1, side * side)
                loss = torch.nn.functional.cross_entropy(model(x), ytr[idx])
                loss.backward()  # accumulates: the sum of the ranks' gradients
                loss_sum += loss.item() * len(idx)
                seen += len(idx)
            if args.world > 1:
                for q in model.parameters():
                    q.grad.div_(args.world)
            opt.step()
            t += 1
        seconds = time.perf_counter() - start
        print(f"{epoch + 1:5d}  {loss_sum / seen:10.4f}  {accuracy(model, xte, yte):8.4f}  {seconds:7.2f}",
              flush=True)


if __name__ == "__main__":
    main()
