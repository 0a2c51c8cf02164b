#!/usr/bin/python3
"""chapter6_torch: PyTorch's side of chapter 6's cross-checks
(tests/crosscheck/chapter6_torch.sh; Debian's python3-torch, 1.13).

    chapter6_torch.py init FILE SEED
        writes torch.manual_seed(SEED)'s 784-256-128-10 MLP as a model file:
        the initial parameters both sides train from (--init)
    chapter6_torch.py evaluate FILE
        loads a model file build/chapter-6 --save wrote, evaluates it on the
        test set, prints "correct N of M"
    chapter6_torch.py train INIT OURS WORLD BATCH STEPS LR MOMENTUM SEED
        trains single-process from INIT on the union of the WORLD ranks'
        batches, as the DistributedSampler deals them (seed + epoch 0, the
        strided split), for STEPS SGD steps, and compares the result with
        OURS, the parameters of build/chapter-6's WORLD-rank run; prints
        PASS/FAIL lines and the errors it measured

The data is what build/chapter-6 read: Fashion-MNIST from Debian's
dataset-fashion-mnist when installed, else the same synthetic records
(lib/dataset/dataset_synthetic.c, recomputed here: splitmix64).

Why the union: each rank's loss is the mean over its B samples, and DDP
averages the W ranks' gradients: (1/W) sum_r (1/B) sum_(i in r) g_i is the
gradient of the mean over all W x B samples, which is what one process
computes on the union. Why not bit for bit: the two sides sum in other
orders (the per-rank means then the average, against one mean over W x B;
OpenBLAS blocks our feature-major products differently from torch's addmm;
torch's kernels fuse multiply-adds). Each is one float32 rounding per
operation, relative 6e-8; through 30 steps of SGD with momentum the
parameters measured here differ by about 1e-7 of each tensor's largest
element. The tolerance is 1e-5: a wrong average (a sum, an average taken
twice, one rank's gradient) or a wrong batch moves them by 1e-2 and more.
"""
import gzip
import struct
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ddp_torch import MLP, read_safetensors, write_safetensors  # noqa: E402

FASHION = Path("/usr/share/datasets/fashion-mnist")
TOLERANCE = 1e-5
M64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


class Synthetic:
    """dataset_synthetic.c's records of 784 bytes, labels 0..9."""

    def __init__(self, seed, n):
        self.seed, self.n = seed, n

    def __len__(self):
        return self.n

    def get(self, indices):
        rows, labels = [], []
        base = splitmix64((self.seed + 0x51ED270B27) & M64)
        for i in indices:
            state = base ^ i
            raw = b"".join(struct.pack("<Q", splitmix64((state + k) & M64)) for k in range(0, 784, 8))
            rows.append(raw[:784])
            labels.append(splitmix64(i ^ (~self.seed & M64)) % 10)
        x = torch.frombuffer(bytearray(b"".join(rows)), dtype=torch.uint8).reshape(len(rows), 784)
        return x, torch.tensor(labels, dtype=torch.int64)


class Idx:
    """A gzipped IDX images file and the labels beside it, whole in memory."""

    def __init__(self, images, labels):
        raw = gzip.open(images).read()
        n = struct.unpack(">I", raw[4:8])[0]
        self.x = torch.frombuffer(bytearray(raw[16:]), dtype=torch.uint8).reshape(n, 784)
        self.y = torch.frombuffer(bytearray(gzip.open(labels).read()[8:]), dtype=torch.uint8).to(torch.int64)

    def __len__(self):
        return len(self.y)

    def get(self, indices):
        idx = torch.tensor(indices, dtype=torch.int64)
        return self.x[idx], self.y[idx]


def dataset(split):
    if (FASHION / "train-images-idx3-ubyte.gz").exists():
        prefix = "train" if split == "train" else "t10k"
        return Idx(FASHION / f"{prefix}-images-idx3-ubyte.gz", FASHION / f"{prefix}-labels-idx1-ubyte.gz")
    # build/chapter-6's stand-ins: the training set with seed 0, the test set with seed 1
    return Synthetic(0, 60000) if split == "train" else Synthetic(1, 10000)


def load_model(path):
    tensors, _ = read_safetensors(path)
    model = MLP([784, 256, 128, 10], False)
    model.load_state_dict(tensors, strict=True)
    return model


def evaluate(path):
    torch.set_num_threads(1)
    model = load_model(path).eval()
    data = dataset("test")
    correct = 0
    with torch.no_grad():
        for start in range(0, len(data), 1000):
            x, y = data.get(list(range(start, min(start + 1000, len(data)))))
            # argmax keeps the first largest, as the C model counts
            correct += (model(x.float().div(255)).argmax(1) == y).sum().item()
    print(f"correct {correct} of {len(data)}")


def distributed_batches(n, world, batch, seed, steps):
    """Each step's union of the ranks' batches: DistributedSampler(shuffle,
    seed), epoch 0, padded to a multiple of world, strided split."""
    g = torch.Generator()
    g.manual_seed(seed)
    order = torch.randperm(n, generator=g).tolist()
    total = -(-n // world) * world
    order += order[: total - n]
    shares = [order[r:total:world] for r in range(world)]
    for s in range(steps):
        yield [i for r in range(world) for i in shares[r][s * batch:(s + 1) * batch]]


def train(init, ours, world, batch, steps, lr, momentum, seed):
    torch.set_num_threads(1)
    model = load_model(init)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    data = dataset("train")
    for indices in distributed_batches(len(data), world, batch, seed, steps):
        x, y = data.get(indices)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x.float().div(255)), y).backward()
        opt.step()
    theirs = model.state_dict()
    mine, _ = read_safetensors(ours)
    failed = 0
    for name, t in theirs.items():
        scale = t.abs().max().item() or 1.0
        err = (mine[name].double() - t.double()).abs().max().item() / scale
        ok = err <= TOLERANCE
        failed += not ok
        what = f"largest difference {err:.2e} of the tensor's largest element, tolerance {TOLERANCE:g}, after {steps} steps"
        print(f"PASS chapter6_torch.union_of_{world}_ranks.{name} ({what})" if ok
              else f"FAIL chapter6_torch.union_of_{world}_ranks.{name}: {what}")
    return failed


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "init" and len(sys.argv) == 4:
        torch.manual_seed(int(sys.argv[3]))
        model = MLP([784, 256, 128, 10], False)
        write_safetensors(sys.argv[2], model.state_dict(), {"format": "pt"})
    elif cmd == "evaluate" and len(sys.argv) == 3:
        evaluate(sys.argv[2])
    elif cmd == "train" and len(sys.argv) == 10:
        a = sys.argv
        sys.exit(1 if train(a[2], a[3], int(a[4]), int(a[5]), int(a[6]), float(a[7]), float(a[8]), int(a[9])) else 0)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
